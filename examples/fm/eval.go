package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/spindle-ps/spindle/examples/fm/fm"
	"github.com/spindle-ps/spindle/examples/internal/subcmd"
	"github.com/spindle-ps/spindle/examples/internal/workerloop"
	"github.com/spindle-ps/spindle/io/model"
)

// evalMain prints the test AUC of a model written by a job, in either
// part format.
func evalMain(ctx context.Context, args []string, stdout io.Writer, lookup func(string) (string, bool)) error {
	fl := flag.NewFlagSet("ps-fm eval", flag.ContinueOnError)
	subcmd.Usage(fl, `Usage: ps-fm eval --model DIR --test FILE [flags]

Prints the test AUC of the model a ps-fm job wrote to DIR (its --output,
local or hdfs://) on FILE, read in the training's --format.`)
	dir := fl.String("model", "", "the job's --output directory (local or hdfs://)")
	test := fl.String("test", "", "file to evaluate on, in --format")
	var layout workerloop.Layout
	layout.Register(fl)
	scale := fl.Float64("init-scale", fm.DefaultInitScale, "the training's --init-scale: the initial embeddings of keys the model lacks")
	if err := subcmd.Parse(fl, args); err != nil {
		return err
	}
	if *dir == "" || *test == "" {
		fmt.Fprintln(fl.Output(), "ps-fm eval: --model and --test are required")
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
	m, err := readModel(ctx, res, *dir, *scale)
	if err != nil {
		return err
	}
	examples, err := readExamples(ctx, res, *test, layout.Records())
	if err != nil {
		return fmt.Errorf("--test: %w", err)
	}
	auc, logloss, err := m.Evaluate(examples)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "test AUC %.4f, log loss %.4f on %d examples; model %s (%d weights, %d embeddings of dim %d)\n",
		auc, logloss, len(examples), *dir, len(m.W), len(m.VKeys), m.Dim)
	return nil
}

// readModel reads the tables w and v of the model in dir. The embedding
// dimension is the width of v.
func readModel(ctx context.Context, res model.Resolver, dir string, initScale float64) (*fm.Model, error) {
	var (
		wKeys, vKeys []uint64
		w, v         []float32
		dim          int
	)
	err := model.ReadTable(ctx, res, dir, "w", func(key uint64, vals []float32) error {
		if len(vals) != 1 {
			return fmt.Errorf("table w of %s: key %d has %d values, want 1", dir, key, len(vals))
		}
		wKeys, w = append(wKeys, key), append(w, vals[0])
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = model.ReadTable(ctx, res, dir, "v", func(key uint64, vals []float32) error {
		if dim == 0 {
			dim = len(vals)
		}
		if len(vals) != dim {
			return fmt.Errorf("table v of %s: key %d has %d values, the keys before it %d", dir, key, len(vals), dim)
		}
		vKeys, v = append(vKeys, key), append(v, vals...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if dim == 0 {
		return nil, fmt.Errorf("table v of %s holds no embeddings", dir)
	}
	c := fm.Config{Dim: dim, Bias: true, InitScale: initScale}
	m, err := fm.NewModel(c, wKeys, w, vKeys, v)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", dir, err)
	}
	return m, nil
}
