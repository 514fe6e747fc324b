#!/usr/bin/env bash
# Regenerates the code generated from IDL files (Thrift). With --check it
# regenerates into a scratch directory and fails if the committed code
# differs.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

command -v thrift >/dev/null 2>&1 || need_debs thrift-compiler
module=github.com/spindle-ps/spindle
# Each IDL: its directory; the code goes to <dir>/<thrift namespace>/.
idls=(
	psnode/transport/internal/wire/meta.thrift
	tracker/internal/rpc/tracker.thrift
)
gen() { # gen IDL OUTDIR PKGDIR: thrift's Go output, gofmt-ed as all committed Go is
	thrift -r --gen "go:package_prefix=$module/$3/,skip_remote" -out "$2" "$1"
	gofmt -w "$2"/*/*.go
}
check=false
[ "${1:-}" = "--check" ] && check=true
for idl in "${idls[@]}"; do
	ns=$(awk '/^namespace go/ {print $3}' "$idl")
	base=$(dirname "$idl")
	out=$base
	[ "$(basename "$base")" = "$ns" ] && out=$(dirname "$base")
	if $check; then
		tmp=$(mktemp -d)
		gen "$idl" "$tmp" "$out"
		for f in "$tmp/$ns"/*.go; do
			cmp -s "$f" "$out/$ns/$(basename "$f")" || { rm -rf "$tmp"; die "$out/$ns/$(basename "$f") is stale: run scripts/gen.sh"; }
		done
		rm -rf "$tmp"
	else
		gen "$idl" "$out" "$out"
		say "regenerated $out/$ns from $idl"
	fi
done
