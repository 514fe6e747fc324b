package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/io/records"
	"github.com/spindle-ps/spindle/io/split"
)

// evalMain prints the test AUC of a model written by a job.
func evalMain(ctx context.Context, args []string, stdout io.Writer, lookup func(string) (string, bool)) error {
	fl := flag.NewFlagSet("ps-lr eval", flag.ContinueOnError)
	dir := fl.String("model", "", "the job's --output directory (local or hdfs://)")
	test := fl.String("test", "", "libsvm file to evaluate on")
	if err := fl.Parse(args); err != nil {
		return errUsage
	}
	if *dir == "" || *test == "" {
		fmt.Fprintln(fl.Output(), "ps-lr eval: --model and --test are required")
		return errUsage
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
	splits, err := split.Plan(ctx, res, []string{*test}, 1<<62)
	if err != nil {
		return err
	}
	var examples []lr.Example
	for _, s := range splits {
		src, err := split.Open(ctx, res, s, split.ReaderOptions{})
		if err != nil {
			return err
		}
		rd, err := records.NewReader(src, records.Options{Format: records.FormatLibSVM})
		if err != nil {
			src.Close()
			return err
		}
		for {
			var ex records.Example
			if err := rd.Next(&ex); err != nil {
				src.Close()
				if errors.Is(err, io.EOF) {
					break
				}
				return err
			}
			examples = append(examples, lr.Example(ex))
		}
	}
	auc, logloss, err := sorted.Evaluate(examples)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "test AUC %.4f, log loss %.4f on %d examples; model %s (%d nonzero weights)\n",
		auc, logloss, len(examples), *dir, sorted.NonZero())
	return nil
}
