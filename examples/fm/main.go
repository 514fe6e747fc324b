// Command ps-fm trains a factorization machine on libsvm data with
// Spindle's parameter servers. The job has two tables: "w", the linear
// weights and the bias (FTRL-proximal by default), and "v", one
// --dim-dimensional embedding per feature (AdaGrad by default). Workers
// stream shards of the input from the tracker in mini-batches, pull the
// weights and embeddings of a batch's keys and push their gradients;
// servers apply them, and the framework checkpoints, restores and exports
// both tables.
//
// Run it through ps-submit, which starts it once per role:
//
//	ps-submit --cluster local -n 2 -s 2 --input data/train.libsvm --output /tmp/fm -- \
//	    ps-fm --epochs 3 --test data/test.libsvm
//
// Synchronous mode (the default) aggregates every worker's gradients of a
// step, table by table in worker-rank order, before anyone pulls again:
// two runs with the same data and flags write bit-identical models. When
// a worker dies the steps go on with the others, and its new process
// rejoins them after the last of its batches the servers received, as
// ps-lr's does. --async lets workers run freely and
// take shards on demand; a dead worker's shards go to the others.
// --staleness T does the same with bounded delay on both tables: no
// worker runs more than T mini-batches ahead of the slowest. In every
// mode a worker pipelines (--prefetch, on by default), as ps-lr does.
//
// Two more commands help around a job:
//
//	ps-fm gen  --out DIR [--rows N --test-rows M]   write DIR/train.libsvm and DIR/test.libsvm (ps-lr's generator)
//	ps-fm eval --model DIR --test FILE               test AUC of a written model
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spindle-ps/spindle/examples/internal/subcmd"
	"github.com/spindle-ps/spindle/examples/lr/gen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv, os.Environ()))
}

// trainUsage heads ps-fm -h.
const trainUsage = `Usage: ps-fm [train] [flags]                       as the command of a ps-submit job
       ps-fm gen --out DIR [flags]                  write a generated data set (ps-lr's)
       ps-fm eval --model DIR --test FILE [flags]   score a written model

ps-fm trains a factorization machine with parameter servers: table "w"
holds the linear weights and the bias, table "v" a --dim-dimensional
embedding per feature. ps-submit starts it once per role:

  ps-submit -n 2 -s 2 --input data/train.libsvm --output /tmp/fm -- \
      ps-fm --epochs 3 --test data/test.libsvm

Synchronous by default (bit-identical models from the same data and
flags); --async and --staleness T let workers run ahead. 'ps-fm gen -h'
and 'ps-fm eval -h' list their own flags.`

// errUsage reports a usage error that was already printed.
var errUsage = subcmd.ErrUsage

// run dispatches to the subcommands; training is the default.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool), environ []string) int {
	return subcmd.Run("ps-fm", args, stderr, map[string]func([]string) error{
		"gen":   func(args []string) error { return gen.Main("ps-fm gen", args, stdout) },
		"eval":  func(args []string) error { return evalMain(ctx, args, stdout, lookup) },
		"train": func(args []string) error { return trainMain(ctx, args, stdout, stderr, lookup, environ) },
	})
}
