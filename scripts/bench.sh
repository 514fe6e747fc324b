#!/usr/bin/env bash
# Runs the benchmarks behind BENCHMARKS.md, side by side in one run: the
# loopback ceiling (iperf3), the raw ZeroMQ loop against the transport and
# the whole runtime, the parameter table against a Go map, the slicer and
# the meta codec. Pass -benchtime or -count through BENCHFLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

need_debs libzmq3-dev pkg-config iperf3
need_go
flags=${BENCHFLAGS:--benchtime=2s -count=3}

say "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
say "loopback ceiling: iperf3, one TCP stream, 5 s"
iperf3 -s -B 127.0.0.1 -p 5299 -1 >/dev/null 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null || true' EXIT
for _ in $(seq 50); do iperf3 -c 127.0.0.1 -p 5299 -t 5 -f m 2>/dev/null | grep -E receiver && break; sleep 0.1; done # until the server listens

say "ZeroMQ: raw loop, transport, runtime"
go test -run='^$' -bench='BenchmarkRaw|BenchmarkTransport|BenchmarkPSNode' $flags ./psnode/transport/zmq/
say "collectives: AllReduce against a raw ZeroMQ ring"
go test -run='^$' -bench=BenchmarkAllReduce $flags ./psnode/collective/
say "parameter table and updaters"
go test -run='^$' -bench='BenchmarkTable|BenchmarkApply' -benchtime=1x -count=3 ./psnode/store/
say "slicer and meta codec"
go test -run='^$' -bench=. $flags ./psnode/partition/ ./psnode/transport/
