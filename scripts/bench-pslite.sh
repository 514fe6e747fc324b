#!/usr/bin/env bash
# psnode against the C++ ps-lite on ps-lite's own benchmark workload, in one
# run, alternating: 1 scheduler, 1 server and 1 worker as separate processes
# on 127.0.0.1 (the way ps-lite's tests/local.sh starts them), 10,000,000
# uint64 keys and float32 values, one push then one pull (times from the
# worker), with the server's handler storing nothing (ps-lite's EmptyHandler)
# or summing into a store (ps-lite's KVServerDefaultHandle, psnode's
# StoreHandler with the sum updater); then a 1-key push repeated serially,
# whose mean is the round trip.
#
#   scripts/bench-pslite.sh PSLITE_DIR         # SPINDLE_BENCH_RUNS=3
#
# PSLITE_DIR is a built copy of dmlc/ps-lite, kept outside this repository
# (nothing of it is part of Spindle). To build one on Debian 12, without
# any download beyond the source itself:
#
#   apt-get install libzmq3-dev libprotobuf-dev protobuf-compiler
#   git clone https://github.com/dmlc/ps-lite /tmp/pslite   # or any copy
#   cd /tmp/pslite && make -j2 DEPS_PATH=/usr PROTOC=/usr/bin/protoc ps test
#
# The script builds the two other variants of tests/test_kv_app_benchmark.cc
# into a temporary directory with sed (the sum handler; one key pushed
# SPINDLE_BENCH_RTT times, default 10000), linked like ps-lite's own tests,
# and psnode's counterpart, psnode/internal/kvbench. It prints each run
# and a table of medians and ranges.
#
# SPINDLE_BENCH_BASELINE=REV also builds kvbench as of git revision REV
# (which must have psnode/internal/kvbench) and runs it in the same
# alternation, as a third column: psnode before and after a change against
# the same ps-lite runs.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

[ $# -eq 1 ] || die "usage: $0 PSLITE_DIR (a built dmlc/ps-lite; see the header of this script)"
pl=$(cd "$1" && pwd)
[ -x "$pl/tests/test_kv_app_benchmark" ] && [ -f "$pl/build/libps.a" ] ||
	die "$pl: no tests/test_kv_app_benchmark or build/libps.a; build ps-lite first (see the header of $0)"
runs=${SPINDLE_BENCH_RUNS:-3}
rtt=${SPINDLE_BENCH_RTT:-10000}
port=${SPINDLE_BENCH_PORT:-8000}
need_go

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$pl/tests/test_kv_app_benchmark.cc
grep -q 'set_request_handle(EmptyHandler<float>)' "$src" && grep -q 'int num = 10000000;' "$src" &&
	grep -q 'int repeat = 1;' "$src" || die "$src is not the benchmark this script knows how to vary"
sed 's/set_request_handle(EmptyHandler<float>)/set_request_handle(KVServerDefaultHandle<float>())/' "$src" >"$tmp/sum.cc"
sed "s/int num = 10000000;/int num = 1;/; s/int repeat = 1;/int repeat = $rtt;/" "$src" >"$tmp/rtt.cc"
for v in sum rtt; do
	say "building ps-lite's benchmark, $v variant"
	g++ -std=c++11 -msse2 -fPIC -O3 -Wall -finline-functions -I"$pl/src" -I"$pl/include" -pthread \
		-o "$tmp/pslite-$v" "$tmp/$v.cc" "$pl/build/libps.a" -lprotobuf-lite -lzmq -pthread
done
cp "$pl/tests/test_kv_app_benchmark" "$tmp/pslite-empty"
say "building psnode/internal/kvbench"
go build -o "$tmp/kvbench" ./psnode/internal/kvbench
base=${SPINDLE_BENCH_BASELINE:-}
systems="psnode"
if [ -n "$base" ]; then
	say "building psnode/internal/kvbench as of $base"
	mkdir "$tmp/base"
	git archive "$base" | tar -x -C "$tmp/base"
	(cd "$tmp/base" && go build -o "$tmp/kvbench-base" ./psnode/internal/kvbench)
	systems="base psnode"
fi
bin_of() { if [ "$1" = base ]; then echo "$tmp/kvbench-base"; else echo "$tmp/kvbench"; fi; }

# local BIN ARGS...: scheduler, 1 server and 1 worker as tests/local.sh
# starts them; prints everything they print. Each call takes the next
# scheduler port (counted in a file: callers run it in a subshell).
echo "$port" >"$tmp/port"
local3() {
	local p
	p=$(($(cat "$tmp/port") + 1))
	echo "$p" >"$tmp/port"
	(
		export DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT=$p
		DMLC_ROLE=scheduler "$@" &
		DMLC_ROLE=server "$@" &
		DMLC_ROLE=worker "$@" &
		wait
	) 2>&1
}

# Each line of results: system variant run push_ms pull_ms (or rtt_us).
res=$tmp/results
: >"$res"
for r in $(seq 1 "$runs"); do
	for v in empty sum; do
		out=$(local3 "$tmp/pslite-$v")
		push=$(sed -n 's/.*Push average time cost: \([0-9.]*\)ms.*/\1/p' <<<"$out")
		pull=$(sed -n 's/.*Pull average time cost: \([0-9.]*\)ms.*/\1/p' <<<"$out")
		[ -n "$push" ] && [ -n "$pull" ] || die "ps-lite $v printed no times: $out"
		echo "pslite $v $r $push $pull" | tee -a "$res"
		for sys in $systems; do
			out=$(local3 "$(bin_of "$sys")" -handler "$v")
			push=$(sed -n 's/.*push_ms=\([0-9.]*\).*/\1/p' <<<"$out")
			pull=$(sed -n 's/.*pull_ms=\([0-9.]*\).*/\1/p' <<<"$out")
			[ -n "$push" ] && [ -n "$pull" ] || die "$sys $v printed no times: $out"
			echo "$sys $v $r $push $pull" | tee -a "$res"
		done
	done
	out=$(local3 "$tmp/pslite-rtt")
	total=$(sed -n 's/.*Push average time cost: \([0-9.]*\)ms.*/\1/p' <<<"$out")
	[ -n "$total" ] || die "ps-lite rtt printed no time: $out"
	echo "pslite rtt $r $(awk -v t="$total" -v n="$rtt" 'BEGIN{printf "%.1f", t*1000/n}') -" | tee -a "$res"
	for sys in $systems; do
		out=$(local3 "$(bin_of "$sys")" -keys 1 -rtt "$rtt")
		us=$(sed -n 's/.*rtt_us=\([0-9.]*\).*/\1/p' <<<"$out")
		[ -n "$us" ] || die "$sys rtt printed no time: $out"
		echo "$sys rtt $r $us -" | tee -a "$res"
	done
done

# median and range of column c of system s, variant v.
stat() {
	awk -v s="$1" -v v="$2" -v c="$3" '$1==s && $2==v {print $c}' "$res" | sort -g |
		awk '{a[NR]=$1} END {m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "%s %s %s\n", m, a[1], a[NR]}'
}
row() { # label variant column unit
	read -r pm plo phi <<<"$(stat pslite "$2" "$3")"
	line="| $1 ($4) | $plo–$phi (median $pm)"
	for sys in $systems; do
		read -r gm glo ghi <<<"$(stat "$sys" "$2" "$3")"
		line="$line | $glo–$ghi (median $gm) | $(awk -v a="$gm" -v b="$pm" 'BEGIN{printf "%.2f×", a/b}')"
	done
	echo "$line |"
}
echo
if [ -n "$base" ]; then
	echo "| $runs runs each, alternating | ps-lite C++ | psnode $base | $base / ps-lite | psnode | psnode / ps-lite |"
	echo "| --- | --- | --- | --- | --- | --- |"
else
	echo "| $runs runs each, alternating | ps-lite C++ | psnode | psnode / ps-lite |"
	echo "| --- | --- | --- | --- |"
fi
row "push, server stores nothing" empty 4 ms
row "pull, server stores nothing" empty 5 ms
row "push into a sum store" sum 4 ms
row "pull from a sum store" sum 5 ms
row "1-key serial push round trip" rtt 4 µs
