// Package dense is the model of ps-dense: softmax regression over dense
// features, trained data-parallel with Adam, either with every rank
// holding the whole optimizer state (ModePlain: gradients all-reduced) or
// with each rank holding the state of its shard of the parameters only
// (ModeZeRO: gradients reduce-scattered, each rank updating its shard,
// parameters all-gathered).
//
// # The same model whatever the number of ranks
//
// Training is defined on the whole data set, independently of how many
// ranks share it: epoch e visits the examples in a permutation drawn
// from (Seed, e), cut into global batches of Batch examples; a rank
// computes the gradient of its contiguous part (Comm.Shard) of each
// global batch. Each example's gradient is rounded to a multiple of
// 2^-32 (GradScale) and summed as int64, which is exact and
// associative, so the batch's gradient sum is the same bits however the
// batch is split and in whatever order the ranks' sums are added. Adam
// then works element by element, the same operations in both modes. So a
// job of any number of ranks, in either mode, computes bit for bit the
// model of one process on the same data, seed and flags (Train with
// Local); the tests check exactly that. The rounding itself changes each
// example's gradient by at most 2^-33 per value, far below what training
// notices.
//
// Bounds keep the sums exact: features are at most MaxFeature in
// absolute value (ParseLine refuses others), so one example contributes
// at most 2^48 per value, and a global batch holds at most MaxBatch
// (2^14) examples: sums stay below 2^62.
//
// # Memory
//
// Adam keeps two float64 values per parameter (first and second moment).
// In ModePlain every rank holds them all; in ModeZeRO rank r holds those
// of its shard of the parameters, about 1/N of them (Trainer.OptimizerBytes
// reports the bytes held). Parameters and the gradient sum stay whole on
// every rank.
package dense
