package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spindle-ps/spindle/examples/dense/dense"
	"github.com/spindle-ps/spindle/examples/internal/subcmd"
	"github.com/spindle-ps/spindle/io/dfs"
)

// genMain writes train.csv and test.csv into --out, drawn from a known
// softmax model, and reports the true model's test accuracy.
func genMain(ctx context.Context, args []string, stdout io.Writer) error {
	cfg := dense.DefaultGen()
	fl := flag.NewFlagSet("ps-dense gen", flag.ContinueOnError)
	subcmd.Usage(fl, `Usage: ps-dense gen --out DIR [flags]

Writes DIR/train.csv and DIR/test.csv ("label,f1,...,fd"), classes drawn
from a known softmax model, and prints that model's test accuracy.`)
	out := fl.String("out", "", "directory for train.csv and test.csv (required)")
	testRows := fl.Int("test-rows", 5000, "rows of the held-out test set")
	fl.IntVar(&cfg.Rows, "rows", cfg.Rows, "rows of the training set")
	fl.IntVar(&cfg.Features, "features", cfg.Features, "features per row")
	fl.IntVar(&cfg.Classes, "classes", cfg.Classes, "classes")
	fl.Uint64Var(&cfg.ModelSeed, "model-seed", cfg.ModelSeed, "seed of the true model")
	fl.Uint64Var(&cfg.RowSeed, "row-seed", cfg.RowSeed, "seed of the training rows (the test rows derive from it)")
	if err := subcmd.Parse(fl, args); err != nil {
		return err
	}
	if *out == "" || *testRows < 1 {
		fmt.Fprintln(fl.Output(), "ps-dense gen: --out is required, and --test-rows must be at least 1")
		return subcmd.ErrUsage
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	test := cfg
	test.Rows, test.RowSeed = *testRows, cfg.RowSeed+1
	for _, f := range []struct {
		name string
		cfg  dense.GenConfig
	}{{"train.csv", cfg}, {"test.csv", test}} {
		name := filepath.Join(*out, f.name)
		err := dfs.WriteAtomic(ctx, dfs.Local{}, name, f.cfg.Generate)
		if err != nil {
			return err
		}
	}
	data, err := readLocal(ctx, filepath.Join(*out, "test.csv"), cfg.Classes)
	if err != nil {
		return err
	}
	acc, loss, err := cfg.TrueModel().Evaluate(data)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s/train.csv (%d rows) and test.csv (%d rows) of %d features and %d classes; the true model's test accuracy is %.4f, loss %.4f\n",
		*out, cfg.Rows, test.Rows, cfg.Features, cfg.Classes, acc, loss)
	return nil
}
