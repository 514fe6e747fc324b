package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spindle-ps/spindle/examples/lr/gen"
)

// genMain writes ps-lr's synthetic click-through data set, on which ps-fm
// is compared with ps-lr.
func genMain(args []string, stdout io.Writer) error {
	cfg := gen.Default()
	fl := flag.NewFlagSet("ps-fm gen", flag.ContinueOnError)
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
		fmt.Fprintln(fl.Output(), "ps-fm gen: --out is required")
		return errUsage
	}
	if *testRows < 1 {
		fmt.Fprintf(fl.Output(), "ps-fm gen: --test-rows %d: need at least 1\n", *testRows)
		return errUsage
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		cfg  gen.Config
	}{{"train.libsvm", cfg}, {"test.libsvm", cfg.TestSet(*testRows)}} {
		if _, err := gen.WriteFile(filepath.Join(*out, f.name), f.cfg); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "wrote %s/train.libsvm (%d rows) and test.libsvm (%d rows)\n", *out, cfg.Rows, *testRows)
	return nil
}
