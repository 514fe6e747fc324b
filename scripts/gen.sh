#!/usr/bin/env bash
# Regenerates the code generated from IDL files (Thrift). With --check it
# regenerates into a scratch directory and fails if the committed code
# differs.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

command -v thrift >/dev/null 2>&1 || need_debs thrift-compiler
wire=psnode/transport/internal/wire
gen() { # gen OUTDIR: thrift's Go output, gofmt-ed as all committed Go is
	thrift -r --gen go:package_prefix=github.com/spindle-ps/spindle/psnode/transport/internal/,skip_remote -out "$1" "$wire/meta.thrift"
	gofmt -w "$1"/wire/*.go
}
if [ "${1:-}" = "--check" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	gen "$tmp"
	for f in "$tmp"/wire/*.go; do
		cmp -s "$f" "$wire/$(basename "$f")" || die "$wire/$(basename "$f") is stale: run scripts/gen.sh"
	done
	exit 0
fi
gen psnode/transport/internal
say "regenerated $wire"
