// Command ps-lr trains sparse logistic regression on libsvm data with
// Spindle's parameter servers: servers hold the weights, one psnode table
// (FTRL-proximal by default; sum, SGD, AdaGrad or Adam with --updater),
// workers stream shards of the input
// from the tracker in mini-batches, pull the weights of a batch's keys and
// push its gradients.
//
// Run it through ps-submit, which starts it once per role:
//
//	ps-submit --cluster local -n 2 -s 2 --input data/train.libsvm --output /tmp/model -- \
//	    ps-lr --epochs 3 --test data/test.libsvm
//
// Synchronous mode (the default) aggregates every worker's gradients of a
// step before anyone pulls again, in worker-rank order: two runs with the
// same data and flags write bit-identical models. When a worker dies the
// steps go on with the others; the launcher starts it again and the new
// process rejoins the steps (psnode.Tables.Rejoin), reading on after the
// last of its batches the servers received, so that no record is applied
// twice and no other task starts again. --async lets workers run freely
// and take shards on demand; a dead worker's shards go to the others.
// --staleness T does the same with bounded delay: no worker runs more
// than T mini-batches ahead of the slowest (0 is bulk-synchronous,
// without bit-exactness). In every mode a worker pipelines (--prefetch, on by default): it sends the
// pulls of the next mini-batches before it computes and pushes the
// current one; in synchronous mode the servers hold such a pull until the
// step before is applied, so the model is the same bit for bit.
//
// Checkpoints, restore and the model are psnode's (psnode.Tables): worker
// 0 asks for a checkpoint after each epoch the job's checkpoint interval
// makes due, and the servers write the model at the end, as text
// ("key<TAB>weight" lines) or, with --model-format binary, in the binary
// part format of package io/model.
//
// Two more commands help around a job:
//
//	ps-lr gen  --out DIR [--rows N --test-rows M]   write DIR/train.libsvm and DIR/test.libsvm
//	ps-lr eval --model DIR --test FILE               test AUC of a written model
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

// trainUsage heads ps-lr -h.
const trainUsage = `Usage: ps-lr [train] [flags]                       as the command of a ps-submit job
       ps-lr gen --out DIR [flags]                  write a generated data set
       ps-lr eval --model DIR --test FILE [flags]   score a written model

ps-lr trains sparse logistic regression with parameter servers: the
servers hold the weights, the workers read shards of the input, pull the
weights of each mini-batch's features and push their gradients.
ps-submit starts it once per role:

  ps-submit -n 2 -s 2 --input data/train.libsvm --output /tmp/model -- \
      ps-lr --epochs 3 --test data/test.libsvm

Synchronous by default (bit-identical models from the same data and
flags); --async and --staleness T let workers run ahead. 'ps-lr gen -h'
and 'ps-lr eval -h' list their own flags.`

// run dispatches to the subcommands; training is the default.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool), environ []string) int {
	return subcmd.Run("ps-lr", args, stderr, map[string]func([]string) error{
		"gen":   func(args []string) error { return gen.Main("ps-lr gen", args, stdout) },
		"eval":  func(args []string) error { return evalMain(ctx, args, stdout, lookup) },
		"train": func(args []string) error { return trainMain(ctx, args, stdout, stderr, lookup, environ) },
	})
}

// errUsage reports a usage error that was already printed.
var errUsage = subcmd.ErrUsage
