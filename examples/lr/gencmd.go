package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spindle-ps/spindle/examples/internal/subcmd"
	"github.com/spindle-ps/spindle/examples/lr/gen"
)

// errUsage reports a usage error that the flag package already printed.
var errUsage = subcmd.ErrUsage

func genMain(args []string, stdout io.Writer) error {
	cfg := gen.Default()
	fl := flag.NewFlagSet("ps-lr gen", flag.ContinueOnError)
	out := fl.String("out", "", "directory for train.libsvm and test.libsvm (required)")
	testRows := fl.Int("test-rows", 20000, "rows of the held-out test set")
	fl.IntVar(&cfg.Rows, "rows", cfg.Rows, "rows of the training set")
	fl.Int64Var(&cfg.ModelSeed, "model-seed", cfg.ModelSeed, "seed of the true model")
	fl.Int64Var(&cfg.RowSeed, "row-seed", cfg.RowSeed, "seed of the training rows (the test rows derive from it)")
	fl.IntVar(&cfg.Features, "features", cfg.Features, "size of the feature id space")
	if err := fl.Parse(args); err != nil {
		return errUsage
	}
	if *out == "" {
		fmt.Fprintln(fl.Output(), "ps-lr gen: --out is required")
		return errUsage
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	train, err := gen.WriteFile(filepath.Join(*out, "train.libsvm"), cfg)
	if err != nil {
		return err
	}
	test, err := gen.WriteFile(filepath.Join(*out, "test.libsvm"), cfg.TestSet(*testRows))
	if err != nil {
		return err
	}
	truth, err := gen.TrueModel(cfg)
	if err != nil {
		return err
	}
	ex, err := gen.Examples(cfg.TestSet(*testRows))
	if err != nil {
		return err
	}
	auc, _, err := truth.Evaluate(ex)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s/train.libsvm (%d rows, %.1f%% positive) and test.libsvm (%d rows); the true model's test AUC is %.4f\n",
		*out, train.Rows, 100*train.PositiveRate(), test.Rows, auc)
	return nil
}
