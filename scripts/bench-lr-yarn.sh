#!/usr/bin/env bash
# The LR job on YARN against the same job with the local launcher, on the
# running mini cluster, in the same run (BenchmarkHadoopTrain in
# examples/lr): a synchronous job of 2 workers and 2 servers, 3 epochs of
# 200,000 generated rows read from HDFS, the model written to HDFS. The
# two alternate, SPINDLE_BENCH_RUNS times each (default 3).
#
#   scripts/minicluster.sh start && eval "$(scripts/minicluster.sh env)"
#   scripts/bench-lr-yarn.sh
#
# Reported per job: examples/s over the training phase (first request for
# input to the committed model), wall-examples/s over the whole job,
# s-to-first-batch (submit until a worker asked for its first input) and
# s-wall (submit to the client's return). See the benchmark's comment.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

runs=${SPINDLE_BENCH_RUNS:-3}
scripts/minicluster.sh status >/dev/null 2>&1 || die "the mini cluster is not running (scripts/minicluster.sh start)"
eval "$(scripts/minicluster.sh env)"
say "BenchmarkHadoopTrain, $runs runs of each job"
go test -run '^$' -bench 'BenchmarkHadoopTrain$' -benchtime 1x -count "$runs" ./examples/lr/
