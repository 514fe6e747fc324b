#!/usr/bin/env bash
# Start-up and turnaround of a trivial YARN job on the running mini cluster:
# Spindle's Go ApplicationMaster (bin/ps-submit --cluster yarn) against
# Hadoop's DistributedShell (scripts/minicluster.sh dshell), in the same run,
# for N = 1, 4 and 8 containers, and prints both and the ratio.
#
#   scripts/minicluster.sh start && eval "$(scripts/minicluster.sh env)"
#   scripts/bench-yarn.sh            # SPINDLE_BENCH_NS="1 4 8", SPINDLE_BENCH_RUNS=3
#
# The cluster must already run (scripts/minicluster.sh status); the script
# does not start or stop it. bin/ps-submit is built when missing or older
# than a Go source file (SPINDLE_BENCH_BUILD=1 rebuilds it anyway).
#
# Both systems run the same N containers of 128 MB and 1 vcore each, with
# the same command, `/bin/sh task.sh STARTS`, where task.sh appends the
# container's start time (date +%s%3N, ms) to the file STARTS and then
# sleeps 2 s. STARTS lies in a local temporary directory, which the
# containers see because the NodeManagers run on this machine.
#   Spindle: bin/ps-submit --cluster yarn -n N -s 0 --worker-memory 128m
#            -- /bin/sh task.sh STARTS        (AM: 512 MB, 1 vcore)
#   DShell:  scripts/minicluster.sh dshell -num_containers N
#            -container_memory 128 -container_vcores 1 -master_memory 512
#            -master_vcores 1 -shell_command '/bin/sh task.sh STARTS'
# Both clients wait until the application ends.
#
# What is measured, per run (t0 = the clock just before the client starts):
#   all running, client  the N-th (last) start time in STARTS minus t0:
#                        from submit until every container's command ran.
#                        Includes the client's start (a JVM for DShell),
#                        staging files in HDFS and the RM/AM/NM work.
#   all running, RM      the N-th start time minus the RM's Start-Time of
#                        the application (submission accepted by the RM).
#   finished, client     the client's wall time, t0 to its exit.
#   finished, RM         the RM's Finish-Time minus Start-Time
#                        (`yarn application -status APP_ID`), without the
#                        client's start and its last poll.
# Each (system, N) runs SPINDLE_BENCH_RUNS times, the systems alternating,
# and the table shows medians, in seconds; ratio = Spindle / DShell (below
# 1 means Spindle is faster). A run that fails, or whose STARTS does not
# get N lines, stops the script.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

ns=${SPINDLE_BENCH_NS:-1 4 8}
runs=${SPINDLE_BENCH_RUNS:-3}
mc=scripts/minicluster.sh
status=$($mc status 2>&1) || die "the mini cluster is not running (scripts/minicluster.sh start)"
nms=$(grep -o '[0-9]* NodeManager' <<<"$status" | cut -d' ' -f1 || true)
eval "$($mc env)"
# Rebuilt when missing or older than a Go source: an old binary may lack --cluster yarn.
if [ ! -x bin/ps-submit ] || [ "${SPINDLE_BENCH_BUILD:-0}" = 1 ] ||
	[ -n "$(find . -path ./.minicluster -prune -o \( -name '*.go' -o -name go.mod -o -name go.sum \) \
		-newer bin/ps-submit -print -quit)" ]; then
	need_go
	say "building bin/ps-submit"
	go build -o bin/ps-submit ./cmd/ps-submit
fi

tmp=$(mktemp -d)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/task.sh" <<'EOF'
date +%s%3N >>"$1"
sleep 2
EOF

now_ms() { date +%s%3N; }
calc() { awk "BEGIN { printf \"%.3f\", $* }"; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

# rm_times APP_ID: prints "start-ms finish-ms" from the RM's application report.
rm_times() {
	local out s f i
	for i in 1 2 3 4 5; do
		out=$($mc yarn application -status "$1" 2>/dev/null || true)
		s=$(sed -n 's/^[[:space:]]*Start-Time[[:space:]]*:[[:space:]]*\([0-9]*\).*/\1/p' <<<"$out")
		f=$(sed -n 's/^[[:space:]]*Finish-Time[[:space:]]*:[[:space:]]*\([0-9]*\).*/\1/p' <<<"$out")
		if [ -n "$s" ] && [ -n "$f" ] && [ "$f" -gt 0 ]; then
			echo "$s $f"
			return 0
		fi
		sleep 1
	done
	die "no Start-Time/Finish-Time in the report of $1: $out"
}

# run_one SYSTEM N TAG: runs one job and sets the globals
#   r_run_client r_run_rm r_fin_client r_fin_rm (seconds).
run_one() {
	local sys=$1 n=$2 tag=$3 starts log t0 t1 rc app last s f
	starts="$tmp/$tag.starts"
	log="$tmp/$tag.log"
	: >"$starts"
	chmod 666 "$starts"
	t0=$(now_ms)
	rc=0
	case $sys in
	spindle)
		bin/ps-submit --cluster yarn -n "$n" -s 0 --worker-memory 128m --worker-cores 1 \
			--jobname "bench-yarn-$tag" -- /bin/sh "$tmp/task.sh" "$starts" >"$log" 2>&1 || rc=$?
		;;
	dshell)
		$mc dshell -appname "bench-yarn-$tag" -num_containers "$n" -container_memory 128 -container_vcores 1 \
			-master_memory 512 -master_vcores 1 \
			-shell_command "/bin/sh $tmp/task.sh $starts" >"$log" 2>&1 || rc=$?
		;;
	esac
	t1=$(now_ms)
	if [ "$rc" -ne 0 ]; then
		tail -n 30 "$log" >&2
		die "$sys with N=$n failed (exit $rc)"
	fi
	app=$(grep -o 'application_[0-9]*_[0-9]*' "$log" | head -n 1 || true)
	[ -n "$app" ] || { tail -n 30 "$log" >&2; die "$sys with N=$n: no application id in its output"; }
	[ "$(wc -l <"$starts")" -eq "$n" ] || {
		tail -n 30 "$log" >&2
		die "$sys with N=$n ($app): $(wc -l <"$starts") container starts recorded, want $n"
	}
	last=$(sort -n "$starts" | tail -n 1)
	read -r s f < <(rm_times "$app")
	r_run_client=$(calc "($last - $t0) / 1000")
	r_run_rm=$(calc "($last - $s) / 1000")
	r_fin_client=$(calc "($t1 - $t0) / 1000")
	r_fin_rm=$(calc "($f - $s) / 1000")
	say "$(printf '%-7s N=%-2s %s: all running %ss (RM %ss), finished %ss (RM %ss)' "$sys" "$n" "$app" \
		"$r_run_client" "$r_run_rm" "$r_fin_client" "$r_fin_rm")"
}

declare -A RC RR FC FR # system,N -> space-separated values
for n in $ns; do
	for i in $(seq "$runs"); do
		# Alternate which system goes first.
		if [ $((i % 2)) -eq 1 ]; then order="spindle dshell"; else order="dshell spindle"; fi
		for sys in $order; do
			run_one "$sys" "$n" "$sys-n$n-r$i"
			RC[$sys,$n]+=" $r_run_client" RR[$sys,$n]+=" $r_run_rm"
			FC[$sys,$n]+=" $r_fin_client" FR[$sys,$n]+=" $r_fin_rm"
		done
	done
done

printf '\n%s cores, %s NodeManager(s), containers of 128 MB running "sleep 2"; median of %d runs, seconds\n' \
	"$(nproc)" "${nms:-?}" "$runs"
printf 'client = from just before the client starts; RM = from the RM'"'"'s Start-Time; ratio = Spindle/DShell\n\n'
printf '%3s | %-26s | %-26s | %-26s | %-26s\n' "" "all running, client" "all running, RM" \
	"finished, client wall" "finished, RM start->finish"
printf '%3s | %8s %8s %8s | %8s %8s %8s | %8s %8s %8s | %8s %8s %8s\n' N \
	Spindle DShell ratio Spindle DShell ratio Spindle DShell ratio Spindle DShell ratio
for n in $ns; do
	row=()
	for m in RC RR FC FR; do
		declare -n arr=$m
		# shellcheck disable=SC2086
		a=$(median ${arr[spindle,$n]}) b=$(median ${arr[dshell,$n]})
		row+=("$a" "$b" "$(ratio "$a" "$b")")
		unset -n arr
	done
	printf '%3s | %8s %8s %8s | %8s %8s %8s | %8s %8s %8s | %8s %8s %8s\n' "$n" "${row[@]}"
done
