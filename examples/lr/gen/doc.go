// Package gen generates a deterministic synthetic click-through-rate-like
// data set for Spindle's example logistic-regression trainer, together
// with the true model its labels are drawn from.
//
// Each row has between MinPerRow and MaxPerRow distinct binary features
// whose ids follow a power law (a few ids are in most rows, most ids are
// rare), and a label drawn from a logistic model with sparse true weights
// and an intercept calibrated to a CTR-like positive rate. Because the
// true model is known ([TrueModel]), a trainer's test AUC can be compared
// with the best achievable one.
//
// # Determinism
//
// The true model depends only on Config.ModelSeed and the model fields;
// the rows depend in addition on Config.RowSeed and the row fields. The
// same configuration gives the same rows, and [Generate] the same bytes,
// on every run. A test set is the same configuration with another row
// seed, [Config.TestSet]: a training and a test file then share their
// true model and are independent samples of it.
//
// # Usage
//
//	cfg := gen.Default()                    // 200,000 rows, 1,000,000 ids
//	_, err := gen.Generate(cfg, trainFile)  // libsvm: "1 3:1 17:1 ..."
//	_, err = gen.Generate(cfg.TestSet(50_000), testFile)
//	truth, err := gen.TrueModel(cfg)
//	auc, logloss, err := truth.Evaluate(testExamples)
//
// [Examples] and [Reader] give the same rows in memory, for tests and
// benchmarks without files.
package gen
