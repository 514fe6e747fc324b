package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/spindle-ps/spindle/examples/dense/dense"
	"github.com/spindle-ps/spindle/examples/internal/subcmd"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
)

// readModel reads a model ps-dense wrote for d features: table w, rows
// 0..d of K weights each (row d the biases); a row left out (all zeros)
// is zeros.
func readModel(ctx context.Context, res model.Resolver, dir string, d int) (dense.Model, error) {
	var m dense.Model
	err := model.ReadTable(ctx, res, dir, tableName, func(key uint64, vals []float64) error {
		if m.W == nil {
			if len(vals) < 2 || len(vals) > dense.MaxClasses {
				return fmt.Errorf("rows of %d classes, want 2..%d", len(vals), dense.MaxClasses)
			}
			m = dense.NewModel(d, len(vals))
		}
		if key > uint64(d) || len(vals) != m.K {
			return fmt.Errorf("row %d of %d values: want rows 0..%d of %d", key, len(vals), d, m.K)
		}
		copy(m.W[int(key)*m.K:], vals)
		return nil
	})
	if err != nil {
		return dense.Model{}, err
	}
	if m.W == nil {
		return dense.Model{}, fmt.Errorf("model %s has no rows", dir)
	}
	return m, nil
}

// evalMain prints the test accuracy of a model written by a job.
func evalMain(ctx context.Context, args []string, stdout io.Writer, lookup func(string) (string, bool)) error {
	fl := flag.NewFlagSet("ps-dense eval", flag.ContinueOnError)
	subcmd.Usage(fl, `Usage: ps-dense eval --model DIR --test FILE [flags]

Prints the test accuracy of the model a ps-dense job wrote to DIR (its
--output, local or hdfs://) on the csv FILE.`)
	dir := fl.String("model", "", "the job's --output directory (local or hdfs://)")
	test := fl.String("test", "", "csv file to evaluate on")
	if err := subcmd.Parse(fl, args); err != nil {
		return err
	}
	if *dir == "" || *test == "" {
		fmt.Fprintln(fl.Output(), "ps-dense eval: --model and --test are required")
		return subcmd.ErrUsage
	}
	res, err := dfs.DefaultResolver(lookup)
	if err != nil {
		return err
	}
	defer res.Close()
	data, err := readAll(ctx, res, *test, dense.MaxClasses)
	if err != nil {
		return fmt.Errorf("--test: %w", err)
	}
	m, err := readModel(ctx, res, *dir, data.D)
	if err != nil {
		return err
	}
	acc, loss, err := m.Evaluate(data)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "test accuracy %.4f, loss %.4f on %d examples; model %s (%d features, %d classes)\n", acc, loss, data.Len(), *dir, m.D, m.K)
	return nil
}
