package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/spindle-ps/spindle/examples/internal/subcmd"
	"github.com/spindle-ps/spindle/examples/internal/workerloop"
	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/io/model"
)

// evalMain prints the test AUC of a model written by a job.
func evalMain(ctx context.Context, args []string, stdout io.Writer, lookup func(string) (string, bool)) error {
	fl := flag.NewFlagSet("ps-lr eval", flag.ContinueOnError)
	subcmd.Usage(fl, `Usage: ps-lr eval --model DIR --test FILE [flags]

Prints the test AUC of the model a ps-lr job wrote to DIR (its --output,
local or hdfs://) on FILE, read in the training's --format.`)
	dir := fl.String("model", "", "the job's --output directory (local or hdfs://)")
	test := fl.String("test", "", "file to evaluate on, in --format")
	var layout workerloop.Layout
	layout.Register(fl)
	if err := subcmd.Parse(fl, args); err != nil {
		return err
	}
	if *dir == "" || *test == "" {
		fmt.Fprintln(fl.Output(), "ps-lr eval: --model and --test are required")
		return errUsage
	}
	if err := errors.Join(layout.Check()...); err != nil {
		return err
	}
	res, err := newResolver(lookup)
	if err != nil {
		return err
	}
	defer res.Close()
	var m lr.Model
	err = model.Read(ctx, res, *dir, func(key uint64, vals []float32) error {
		m.Keys = append(m.Keys, key)
		m.W = append(m.W, vals[0])
		return nil
	})
	if err != nil {
		return err
	}
	// Parts are each sorted; the hash partitioner interleaves them.
	idx := make([]int, len(m.Keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case m.Keys[a] < m.Keys[b]:
			return -1
		case m.Keys[a] > m.Keys[b]:
			return 1
		}
		return 0
	})
	sorted := lr.Model{Keys: make([]uint64, len(idx)), W: make([]float32, len(idx))}
	for i, j := range idx {
		sorted.Keys[i], sorted.W[i] = m.Keys[j], m.W[j]
	}
	examples, err := readExamples(ctx, res, *test, layout.Records())
	if err != nil {
		return fmt.Errorf("--test: %w", err)
	}
	auc, logloss, err := sorted.Evaluate(examples)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "test AUC %.4f, log loss %.4f on %d examples; model %s (%d nonzero weights)\n",
		auc, logloss, len(examples), *dir, sorted.NonZero())
	return nil
}
