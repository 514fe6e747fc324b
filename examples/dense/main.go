// Command ps-dense trains softmax regression on dense csv data
// ("label,f1,...,fd", the label a class from 0) data-parallel, with
// psnode's collectives and no parameter servers: every worker holds the
// parameters, computes the gradient of its part of each global batch,
// and the workers reduce the gradients and apply Adam.
//
// Run it through ps-submit as a job without servers, whose workers meet
// at a scheduler (-s 0):
//
//	ps-submit --cluster local -n 4 -s 0 --input data/train.csv --output /tmp/dense -- \
//	    ps-dense --epochs 5 --test data/test.csv
//
// --mode plain (the default) all-reduces the gradient and every worker
// updates every parameter, holding the whole optimizer state; --mode zero
// reduce-scatters it, each worker updating its shard of the parameters
// with its shard of Adam's state (about 1/N of it), and all-gathers the
// parameters. Both compute bit for bit the model of one process on the
// same data, seed and flags (see package dense), whatever the number of
// workers.
//
// With --checkpoint-dir, worker 0 writes the parameters and the whole
// optimizer state after each epoch the interval makes due, and the
// launcher commits it; a job started again (a worker died, or --resume)
// continues from it. Worker 0 writes the model to --output: table "w",
// row j the weights of feature j for each class, row d the biases; the
// launcher marks it complete once every task has exited 0.
//
//	ps-dense gen  --out DIR [--rows N --features D --classes K]   write DIR/train.csv and DIR/test.csv
//	ps-dense eval --model DIR --test FILE                           test accuracy of a written model
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spindle-ps/spindle/examples/internal/subcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv, os.Environ()))
}

// trainUsage heads ps-dense -h.
const trainUsage = `Usage: ps-dense [train] [flags]                       as the command of a ps-submit job
       ps-dense gen --out DIR [flags]                  write a generated data set
       ps-dense eval --model DIR --test FILE [flags]   score a written model

ps-dense trains softmax regression on dense csv data ("label,f1,...,fd",
the label a class from 0) data-parallel, with collectives and no
parameter servers: every worker holds the parameters, and the workers
reduce their gradients each step. ps-submit runs it as a job without
servers, whose workers meet at a scheduler (-s 0):

  ps-submit -n 4 -s 0 --input data/train.csv --output /tmp/dense -- \
      ps-dense --epochs 5 --test data/test.csv

'ps-dense gen -h' and 'ps-dense eval -h' list their own flags.`

// run dispatches to the subcommands; training is the default.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool), environ []string) int {
	return subcmd.Run("ps-dense", args, stderr, map[string]func([]string) error{
		"gen":   func(args []string) error { return genMain(ctx, args, stdout) },
		"eval":  func(args []string) error { return evalMain(ctx, args, stdout, lookup) },
		"train": func(args []string) error { return trainMain(ctx, args, stdout, stderr, lookup, environ) },
	})
}
