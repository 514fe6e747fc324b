// Package lr is the model math of Spindle's example trainer: sparse binary
// logistic regression on libsvm-style examples, shared by the distributed
// trainer and by [Local], the single-process baseline it is checked
// against.
//
// # Model
//
// An [Example] is a label (0 or 1) and a sparse feature vector: keys
// sorted ascending and unique, with one value per key. The model is one
// float32 weight per key plus an intercept, which is the weight of
// [InterceptKey] (key 0) and has value 1 in every example without being
// stored in it. Feature ids from libsvm data are used as keys unchanged,
// so real features must have ids of at least 1; an example holding key 0
// would collide with the intercept, and [BatchKeys] rejects it with an
// error wrapping [ErrExample]. The margin of an example is
//
//	z = w[InterceptKey] + Σ_k w[k]·x[k]
//
// its predicted probability is Sigmoid(z), and its loss is the log loss
// -y·log(p) - (1-y)·log(1-p), computed from z in a form that neither
// overflows nor loses precision for large |z|.
//
// # Training step
//
// One mini-batch step, as the distributed trainer runs it with the pull
// and push going to the servers, and as [Local.Step] runs it in memory:
//
//	keys, err := lr.BatchKeys(batch, keys)       // sorted, unique, with key 0
//	// pull: w[i] = weight of keys[i] (0 if the key was never pushed)
//	loss, err := lr.Gradient(batch, keys, w, grad) // grad[i] = ∂(Σ loss)/∂w[i]
//	// push: the updater applies grad[i] to keys[i], in key order
//
// [Gradient] computes the SUM of the per-example gradients, not their
// mean. A parameter server adds up the pushes of its workers, and the
// per-coordinate optimizers used here (FTRL-proximal, AdaGrad) adapt
// their step size to the size of each coordinate's gradients, so a sum
// needs no rescaling by the batch or worker count. For plain SGD the
// learning rate is per batch sum: divide it by the batch size to compare
// with a per-example rate.
//
// [DefaultFTRLParams] are the FTRL-proximal parameters tuned for this
// trainer on the synthetic data set of package gen.
//
// # Evaluation
//
// A trained model is a [Model]: sorted keys and their weights. [Score]
// computes an example's margin from any lookup function, [AUC] the exact
// area under the ROC curve (ties count 1/2) and [LogLoss] the mean log
// loss from margins; [Model.Evaluate] does all three for a slice of
// examples.
//
// Nothing in this package is safe for concurrent use on shared values;
// the functions are pure and may run concurrently on distinct arguments.
package lr
