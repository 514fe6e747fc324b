#!/usr/bin/env bash
# Sequential read of one large HDFS file from the running mini cluster, by
# Spindle's Go reader (io/dfs raw bytes, and io/split lines) and by Hadoop's
# own Java client (`hdfs dfs -cat FILE > /dev/null`), in the same run, and
# prints MB/s and the ratio.
#
#   scripts/minicluster.sh start && eval "$(scripts/minicluster.sh env)"
#   scripts/bench-hdfs-read.sh            # SPINDLE_BENCH_MB=512 by default
#
# The file (libsvm-like text in the cluster's default 128 MiB blocks) is
# written once and kept at /spindle-bench/read-<MB>m.libsvm. Each reader
# runs SPINDLE_BENCH_RUNS times (default 3), alternating, and the best run
# counts. The Java client is timed twice per run, one JVM each: `-cat F`
# and `-cat F F F F`; the difference is three reads without the JVM's
# start, which is what its MB/s is computed from. The figure with the JVM
# start included is shown too.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

mb=${SPINDLE_BENCH_MB:-512}
runs=${SPINDLE_BENCH_RUNS:-3}
mc=scripts/minicluster.sh
$mc status >/dev/null || die "the mini cluster is not running (scripts/minicluster.sh start)"
eval "$($mc env)"
need_go

file=/spindle-bench/read-${mb}m.libsvm
uri="${SPINDLE_MINICLUSTER_FS}${file}"
bytes=$((mb * 1024 * 1024))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

have=$($mc hdfs dfs -stat %b "$file" 2>/dev/null || true)
if [ "$have" != "$bytes" ]; then
	say "writing $mb MiB to $uri"
	line='1 3:0.5 17:1.25 42:-0.75 1000:2 65536:0.125 999999:1 18446744073709551615:3.5'
	{ yes "$line" || true; } | head -c "$bytes" >"$tmp/data"
	$mc hdfs dfs -mkdir -p /spindle-bench
	$mc hdfs dfs -put -f "$tmp/data" "$file"
	rm -f "$tmp/data"
fi

now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.6f\", $* }"; }
java_cat() { # java_cat FILE...: prints seconds
	local t0 t1
	t0=$(now)
	$mc hdfs dfs -cat "$@" >/dev/null
	t1=$(now)
	calc "$t1 - $t0"
}
go test -c -o "$tmp/split.test" ./io/split/ >/dev/null
go_read() { # prints "file-MB/s lines-MB/s"
	SPINDLE_BENCH_HDFS_FILE="$uri" "$tmp/split.test" -test.run '^$' -test.bench 'HadoopSequentialRead' \
		-test.benchtime 1x |
		awk '/reader=file/ {for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") f = $i}
		     /reader=lines/ {for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") l = $i}
		     END {print f, l}'
}

best_once=0 best_xfer=0 best_file=0 best_lines=0
for i in $(seq "$runs"); do
	once=$(java_cat "$file")
	four=$(java_cat "$file" "$file" "$file" "$file")
	xfer=$(calc "($four - $once) / 3")
	read -r f l < <(go_read)
	[ -n "$f" ] && [ -n "$l" ] || die "the Go benchmark did not report (run: go test -bench HadoopSequentialRead ./io/split/)"
	say "run $i: hdfs dfs -cat F ${once}s, -cat F F F F ${four}s (${xfer}s a read), Go file ${f} MB/s, Go lines ${l} MB/s"
	best_once=$(calc "($best_once == 0 || $once < $best_once) ? $once : $best_once")
	best_xfer=$(calc "($best_xfer == 0 || $xfer < $best_xfer) ? $xfer : $best_xfer")
	best_file=$(calc "($f > $best_file) ? $f : $best_file")
	best_lines=$(calc "($l > $best_lines) ? $l : $best_lines")
done

# MB/s as Go's testing package counts them: 10^6 bytes per second.
java_raw=$(calc "$bytes / 1000000 / $best_once")
java_net=$(calc "$bytes / 1000000 / $best_xfer")
printf '\n%s, %d MiB file %s, best of %d runs (MB = 10^6 bytes)\n' "$(nproc) cores" "$mb" "$uri" "$runs"
printf '  %-46s %8.1f MB/s\n' "hdfs dfs -cat F (Java, one JVM start included)" "$java_raw"
printf '  %-46s %8.1f MB/s\n' "hdfs dfs -cat (Java, a read within one JVM)" "$java_net"
printf '  %-46s %8.1f MB/s  (%.2fx Java)\n' "Go dfs.File, 1 MiB reads" "$best_file" "$(calc "$best_file / $java_net")"
printf '  %-46s %8.1f MB/s  (%.2fx Java)\n' "Go split.LineReader, lines" "$best_lines" "$(calc "$best_lines / $java_net")"
