#!/usr/bin/env bash
# Runs every test of Spindle on this machine, installing what is missing
# first: gofmt, generated code and go vet, go test -race over every package,
# then the Hadoop stage against a real mini cluster (HDFS + YARN) started
# from Maven Central jars, and the Kerberos stage against the same cluster
# secured with Kerberos (with each dfs.data.transfer.protection, with
# DataNodes that encrypt every block, and with short-lived delegation
# tokens). Both fail, never skip, when the cluster cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

need_debs libzmq3-dev pkg-config gcc git
# Headless Chromium for the status page's browser tests (internal/browsertest),
# which fail rather than skip without it under CI=true or SPINDLE_TEST_BROWSER=required.
need_debs chromium
export SPINDLE_TEST_BROWSER=required
need_go
say "downloading Go modules"
go mod download

say "checking formatting (gofmt)"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
[ -z "$unformatted" ] || die "gofmt would change: $unformatted"

say "checking generated code is up to date"
need_debs thrift-compiler
scripts/gen.sh --check

# packages_with NAME prints the import paths of the packages that have a
# top-level test or example whose name contains NAME, the ones
# "go test -run NAME" runs something in. The cluster stages test only
# those: each other package's race-built test binary costs a link and a
# start for nothing, over a minute a stage on two cores. It dies when
# there is none, so that a stage never passes having run nothing.
packages_with() {
  local found
  found=$(go list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do
    if grep -qE "^func (Test|Example)[A-Za-z0-9_]*$1" "$dir"/*_test.go 2>/dev/null; then
      echo "$pkg"
    fi
  done) || die "go list ./... failed"
  [ -n "$found" ] || die "no package has a test named like $1"
  echo "$found"
}

say "go vet ./..."
go vet ./...

say "checking the direction of imports"
go test -count=1 ./scripts/deps/

say "go test -race ./... (this takes a few minutes)"
go test -race -count=1 -timeout 30m ./...

say "Hadoop stage: starting the mini cluster (the first start downloads Hadoop's jars)"
trap 'say "stopping the mini cluster"; scripts/minicluster.sh stop || true' EXIT
scripts/minicluster.sh start
eval "$(scripts/minicluster.sh env)"
# Integration tests read SPINDLE_TEST_HADOOP=required as "fail, don't skip,
# when the cluster is unreachable".
export SPINDLE_TEST_HADOOP=required
say "Hadoop stage: checking HDFS and YARN with Hadoop's own tools"
scripts/hadoop-smoke.sh
# Every integration test is named TestHadoop...; with SPINDLE_TEST_HADOOP=required
# they fail, rather than skip, when the cluster does not answer.
say "Hadoop stage: go test -race -run Hadoop against the mini cluster"
pkgs=$(packages_with Hadoop)
go test -race -count=1 -timeout 20m -run 'Hadoop' $pkgs

# The Kerberos tests (TestKerberos...) need the cluster secured: its own KDC,
# HDFS and YARN that accept only Kerberos and delegation tokens. They run
# twice: with Hadoop's default protection (authentication), and with every
# RPC and every block sent signed and encrypted (privacy), the blocks with
# AES-CTR as production clusters configure it (TestKerberosDataTransfer
# also reads and writes there through a client that leaves AES out, and
# so gets the SASL layer's own cipher).
export SPINDLE_TEST_KERBEROS=required
for protection in authentication privacy; do
  say "Kerberos stage: restarting the mini cluster secured with Kerberos, hadoop.rpc.protection and dfs.data.transfer.protection=$protection"
  scripts/minicluster.sh stop
  suites=()
  if [ "$protection" = privacy ]; then
    suites=(dfs.encrypt.data.transfer.cipher.suites=AES/CTR/NoPadding)
  fi
  scripts/minicluster.sh start --kerberos "hadoop.rpc.protection=$protection" "dfs.data.transfer.protection=$protection" "${suites[@]}"
  eval "$(scripts/minicluster.sh env)"
  say "Kerberos stage: go test -race -run Kerberos against the secured cluster ($protection)"
  pkgs=$(packages_with Kerberos)
  go test -race -count=1 -timeout 10m -run 'Kerberos' $pkgs
done
# DataNodes that encrypt every block they send and receive
# (dfs.encrypt.data.transfer, with AES as production clusters configure
# it), RPC signed (integrity): the HDFS client's own exchange with the
# data encryption key, which a file system replaces before it expires
# (TestKerberosEncryptedTransfer), and every Kerberos test again there.
say "Kerberos stage: restarting the secured mini cluster with dfs.encrypt.data.transfer, hadoop.rpc.protection=integrity"
scripts/minicluster.sh stop
scripts/minicluster.sh start --kerberos hadoop.rpc.protection=integrity dfs.encrypt.data.transfer=true dfs.encrypt.data.transfer.cipher.suites=AES/CTR/NoPadding
eval "$(scripts/minicluster.sh env)"
say "Kerberos stage: go test -race -run Kerberos against DataNodes that encrypt every block"
pkgs=$(packages_with Kerberos)
SPINDLE_TEST_ENCRYPTED_TRANSFER=required go test -race -count=1 -timeout 10m -run 'Kerberos' $pkgs
# A job that outlives its delegation tokens (TestKerberosTokenLifetime)
# needs tokens that live 45 s however often they are renewed (and 30 s
# without a renewal), as they live 7 days (1 day) on a real cluster. Its
# DataNodes sign every block they send (integrity), the third setting of
# dfs.data.transfer.protection.
export SPINDLE_TEST_TOKEN_LIFETIME=required
say "Kerberos stage: restarting the secured mini cluster with delegation tokens that live 45 s, dfs.data.transfer.protection=integrity"
scripts/minicluster.sh stop
scripts/minicluster.sh start --kerberos dfs.namenode.delegation.token.max-lifetime=45000 dfs.namenode.delegation.token.renew-interval=30000 dfs.data.transfer.protection=integrity
eval "$(scripts/minicluster.sh env)"
say "Kerberos stage: go test -race -run TokenLifetime (a job past its tokens' lifetime), and reads and writes through signing DataNodes"
pkgs=$(packages_with TokenLifetime)
go test -race -count=1 -timeout 10m -run 'TokenLifetime' $pkgs
go test -race -count=1 -timeout 5m -run 'TestKerberosDataTransfer' ./io/dfs/
say "all tests passed"
