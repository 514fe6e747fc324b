#!/usr/bin/env bash
# Trains the example model on this machine: generates a synthetic CTR-like
# data set (200,000 training and 20,000 test rows), runs ps-lr with the
# local tracker (2 workers, 2 servers, 3 epochs), and prints the model's
# test AUC and where the model is. Installs what is missing first.
#
# SPINDLE_DEMO_DIR chooses where data and model go (default: a new
# temporary directory); extra arguments go to ps-lr (e.g. --async).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

need_debs libzmq3-dev pkg-config gcc
need_go
say "building ps-submit and ps-lr into bin/"
go build -o bin/ps-submit ./cmd/ps-submit
go build -o bin/ps-lr ./examples/lr

work=${SPINDLE_DEMO_DIR:-$(mktemp -d -t spindle-demo.XXXXXX)}
mkdir -p "$work"
say "generating the data in $work/data"
bin/ps-lr gen --rows 200000 --test-rows 20000 --out "$work/data"

rm -rf "$work/model"
say "training: ps-submit --cluster local -n 2 -s 2 ... -- ps-lr --epochs 3"
bin/ps-submit --cluster local -n 2 -s 2 \
	--input "$work/data/train.libsvm" --output "$work/model" \
	-- bin/ps-lr --epochs 3 --test "$work/data/test.libsvm" "$@"

say "evaluating the written model"
bin/ps-lr eval --model "$work/model" --test "$work/data/test.libsvm"
say "the model is in $work/model (part-* files of key<TAB>weight lines)"
