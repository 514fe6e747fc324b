package gen

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spindle-ps/spindle/examples/internal/subcmd"
)

// Main is the gen subcommand of the examples (prog is its name in
// messages, such as "ps-lr gen"): it writes train.libsvm and test.libsvm
// into --out and reports the true model's test AUC. A usage error has
// already been printed when Main returns subcmd.ErrUsage.
func Main(prog string, args []string, stdout io.Writer) error {
	cfg := Default()
	fl := flag.NewFlagSet(prog, flag.ContinueOnError)
	subcmd.Usage(fl, fmt.Sprintf(`Usage: %s --out DIR [flags]

Writes DIR/train.libsvm and DIR/test.libsvm, binary labels drawn from a
known sparse logistic model, and prints that model's test AUC: the best
a trained model can hope for.`, prog))
	out := fl.String("out", "", "directory for train.libsvm and test.libsvm (required)")
	testRows := fl.Int("test-rows", 20000, "rows of the held-out test set")
	fl.IntVar(&cfg.Rows, "rows", cfg.Rows, "rows of the training set")
	fl.Int64Var(&cfg.ModelSeed, "model-seed", cfg.ModelSeed, "seed of the true model")
	fl.Int64Var(&cfg.RowSeed, "row-seed", cfg.RowSeed, "seed of the training rows (the test rows derive from it)")
	fl.IntVar(&cfg.Features, "features", cfg.Features, "size of the feature id space")
	if err := subcmd.Parse(fl, args); err != nil {
		return err
	}
	if *out == "" {
		fmt.Fprintf(fl.Output(), "%s: --out is required\n", prog)
		return subcmd.ErrUsage
	}
	if *testRows < 1 {
		fmt.Fprintf(fl.Output(), "%s: --test-rows %d: need at least 1\n", prog, *testRows)
		return subcmd.ErrUsage
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	train, err := WriteFile(filepath.Join(*out, "train.libsvm"), cfg)
	if err != nil {
		return err
	}
	test, err := WriteFile(filepath.Join(*out, "test.libsvm"), cfg.TestSet(*testRows))
	if err != nil {
		return err
	}
	truth, err := TrueModel(cfg)
	if err != nil {
		return err
	}
	ex, err := Examples(cfg.TestSet(*testRows))
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
