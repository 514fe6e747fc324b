#!/usr/bin/env bash
# ps-lr's training throughput against the in-memory loop, in one run:
# each round runs BenchmarkTrain's in-memory loop (lr.Local, the same
# updates in one process) and then whole 2 × 2 jobs through the local
# tracker, by default synchronous, bounded delay (staleness 2) and
# asynchronous, and divides each job's examples per second by the same
# round's in-memory figure. It prints each round and a table of the
# medians of those ratios, with their range.
#
#   scripts/bench-train.sh                    # SPINDLE_BENCH_RUNS=5
#
# SPINDLE_BENCH_MODES is a regular expression over BenchmarkTrain's mode
# names (default '(sync|staleness=2|async)'; 'async/nocache' for the
# asynchronous job reading its files every epoch). SPINDLE_INSECURE=1
# runs the jobs without CURVE, as --insecure does.
#
# SPINDLE_BENCH_BASELINE=REV also builds the benchmark as of git revision
# REV and runs it in the same rounds, the two builds taking turns to go
# first: a change measured against the code before it on the same
# stretch of this machine, whose speed can move by a tenth within an
# hour.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

runs=${SPINDLE_BENCH_RUNS:-5}
modes=${SPINDLE_BENCH_MODES:-(sync|staleness=2|async)}
base=${SPINDLE_BENCH_BASELINE:-}
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "SPINDLE_BENCH_RUNS=$runs: want a positive number of rounds"
[ -z "$base" ] || git rev-parse -q --verify "$base^{commit}" >/dev/null ||
	die "SPINDLE_BENCH_BASELINE=$base: no such commit in $PWD"
need_debs libzmq3-dev pkg-config
need_go

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/head"
say "building BenchmarkTrain from the working tree"
go test -c -o "$tmp/head/lr.test" ./examples/lr
systems="head"
if [ -n "$base" ]; then
	say "building BenchmarkTrain as of $base"
	mkdir "$tmp/base"
	git archive "$base" | tar -x -C "$tmp/base"
	(cd "$tmp/base" && go test -c -o "$tmp/base/lr.test" ./examples/lr)
	systems="base head"
fi
# The test binary builds ps-lr from the package directory it runs in.
dir_of() { if [ "$1" = base ]; then echo "$tmp/base/examples/lr"; else echo "$PWD/examples/lr"; fi; }

# Each line of results: system round name examples/s.
res=$tmp/results
: >"$res"
jobs="BenchmarkTrain/^impl=job\$/^mode=$modes\$/^workers=2\$/"
for r in $(seq 1 "$runs"); do
	order=$systems
	if [ $((r % 2)) -eq 0 ]; then order=$(tr ' ' '\n' <<<"$systems" | tac | tr '\n' ' '); fi
	for sys in $order; do
		out=$(cd "$(dir_of "$sys")" && for b in 'BenchmarkTrain/impl=inmemory' "$jobs"; do
			"$tmp/$sys/lr.test" -test.run '^$' -test.benchtime 1x -test.bench "$b" 2>&1 || exit 1
		done) || die "$sys, round $r: $out"
		lines=$(sed -n 's#^BenchmarkTrain/impl=\([^ ]*\)-[0-9]* .* \([0-9.]*\) examples/s.*#\1 \2#p' <<<"$out" |
			sed 's#/workers=2/servers=2##; s#^inmemory/workers=1#inmemory#; s#^job/mode=##')
		grep -q '^inmemory ' <<<"$lines" && [ "$(wc -l <<<"$lines")" -ge 2 ] ||
			die "$sys, round $r: no in-memory figure or no job matched $modes: $out"
		sed "s/^/$sys $r /" <<<"$lines" | tee -a "$res"
	done
done

# ratios S N: each round's ratio of name N to the in-memory loop, system S.
ratios() {
	awk -v s="$1" -v n="$2" '$1==s && $3=="inmemory" {im[$2]=$4} $1==s && $3==n {v[$2]=$4}
		END {for (r in v) if (im[r] > 0) printf "%.1f\n", 100*v[r]/im[r]}' "$res"
}
# stat FORMAT: median and range of the numbers on stdin.
stat() {
	sort -g | awk -v f="$1" '{a[NR]=$1} END {m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf f " " f " " f "\n", m, a[1], a[NR]}'
}

# figures S N: the examples/s of name N in every round, system S.
figures() { awk -v s="$1" -v n="$2" '$1==s && $3==n {print $4}' "$res"; }

# Two ways to sum the rounds up, both printed: the median of each round's
# ratio (the pairing cancels a slow stretch of the machine), and the
# median job against the median in-memory loop (a single slow run of
# either counts for less).
echo
header="| $runs rounds, of the in-memory loop"
rule="| ---"
for sys in $systems; do
	name="working tree"
	[ "$sys" = base ] && name=$base
	header="$header | $name: median of the rounds' ratios (range) | $name: median examples/s (of the in-memory median)"
	rule="$rule | --- | ---"
done
echo "$header |"
echo "$rule |"
names=$(awk '!seen[$3]++ {print $3}' "$res")
for n in $names; do
	line="| $n"
	for sys in $systems; do
		read -r im _ _ <<<"$(figures "$sys" inmemory | stat %.0f)"
		read -r m _ _ <<<"$(figures "$sys" "$n" | stat %.0f)"
		if [ "$n" = inmemory ]; then
			line="$line | | $m"
		else
			read -r r lo hi <<<"$(ratios "$sys" "$n" | stat %.1f)"
			line="$line | $r% ($lo–$hi) | $m ($(awk -v a="$m" -v b="$im" 'BEGIN{printf "%.1f%%", 100*a/b}'))"
		fi
	done
	echo "$line |"
done
