#!/usr/bin/env bash
# Regenerates the code generated from IDL files (Thrift and protobuf). With --check it
# regenerates into a scratch directory and fails if the committed code
# differs.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

command -v thrift >/dev/null 2>&1 || need_debs thrift-compiler
command -v protoc >/dev/null 2>&1 || need_debs protobuf-compiler
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

# Protobuf: each directory's .proto files, compiled with paths relative to
# the repository root (so the registered file names are unique), into .pb.go
# files beside them. protoc-gen-go is pinned to the protobuf runtime in go.mod.
protoc_gen_go_version=v1.31.0
proto_dirs=(
	internal/hadoop/proto
	yarn/internal/proto
	yarn/internal/tokenpb
)
pgg_bin=$(mktemp -d)
trap 'rm -rf "$pgg_bin"' EXIT
if command -v protoc-gen-go >/dev/null 2>&1 && [ "$(protoc-gen-go --version 2>/dev/null)" = "protoc-gen-go $protoc_gen_go_version" ]; then
	ln -s "$(command -v protoc-gen-go)" "$pgg_bin/protoc-gen-go"
else
	GOBIN=$pgg_bin go install "google.golang.org/protobuf/cmd/protoc-gen-go@$protoc_gen_go_version"
fi
genpb() { # genpb OUTROOT PROTO...: protoc-gen-go output under OUTROOT/<dir>/
	PATH="$pgg_bin:$PATH" protoc --proto_path=. --go_out="$1" --go_opt=paths=source_relative "${@:2}"
}
for dir in "${proto_dirs[@]}"; do
	protos=("$dir"/*.proto)
	if $check; then
		tmp=$(mktemp -d)
		genpb "$tmp" "${protos[@]}"
		for f in "$tmp/$dir"/*.pb.go; do
			cmp -s "$f" "$dir/$(basename "$f")" || { rm -rf "$tmp"; die "$dir/$(basename "$f") is stale: run scripts/gen.sh"; }
		done
		for f in "$dir"/*.pb.go; do
			[ -e "$tmp/$dir/$(basename "$f")" ] || { rm -rf "$tmp"; die "$f has no .proto: remove it or run scripts/gen.sh"; }
		done
		rm -rf "$tmp"
	else
		genpb . "${protos[@]}"
		say "regenerated $dir/*.pb.go"
	fi
done
