// Package fm is the model math of ps-fm, Spindle's factorization-machine
// trainer: a second-order factorization machine (Rendle 2010) over the
// sparse libsvm-style examples of package lr, with the logistic loss.
//
// # Model
//
// Each feature i has a linear weight w_i and an embedding v_i of Dim
// values (8 by default); with Config.Bias the model also has a global
// bias w0, the weight of lr.InterceptKey. The margin of an example x is
//
//	ŷ = w0 + Σ_i w_i x_i + Σ_{i<j} <v_i, v_j> x_i x_j
//	  = w0 + Σ_i w_i x_i + ½ Σ_f [(Σ_i v_if x_i)² − Σ_i v_if² x_i²]
//
// computed in the second form, in O(Dim · nonzeros). Its predicted
// probability is lr.Sigmoid(ŷ) and its loss the log loss.
//
// # Training step
//
// The weights and the embeddings live in two tables, keyed by feature id:
// "w" of width 1 and "v" of width Dim. One mini-batch step:
//
//	keys, err := lr.BatchKeys(batch, keys)          // sorted, with the intercept key first
//	// pull w of keys and v of fm.FeatureKeys(keys) (the intercept has no embedding)
//	loss, err := cfg.Gradient(batch, keys, w, v, gw, gv)
//	// push gw for cfg.WeightKeys(keys) and gv for fm.FeatureKeys(keys)
//
// Gradients are sums over the batch, as in package lr, which suits the
// per-coordinate updaters used (FTRL-proximal for the weights, AdaGrad for
// the embeddings).
//
// # Initial embeddings
//
// Embeddings cannot start at 0: the gradient of the interaction term
// vanishes there. [Init] draws a key's initial embedding from a generator
// seeded by the key alone, uniformly in [-InitScale, InitScale), so that
// every server and worker agrees on it without communication and every run
// starts from the same model. A key never trained has its initial
// embedding, in training and in [Model].
//
// # Evaluation
//
// A trained model is a [Model]; [Model.Evaluate] returns the AUC and the
// mean log loss of a set of examples, through lr.AUC and lr.LogLoss.
// [Local] trains in memory with the updates a one-worker, one-server job
// applies, the baseline the distributed trainer is checked against.
//
// On the synthetic data of package gen, whose labels come from a linear
// model, the interactions carry no signal; the trainer's defaults (small
// initial embeddings, a small embedding learning rate, L2) keep them small,
// so that the machine does as well as logistic regression there and can
// learn interactions on data that has them.
//
// Nothing in this package is safe for concurrent use on shared values;
// the functions are pure and may run concurrently on distinct arguments.
package fm
