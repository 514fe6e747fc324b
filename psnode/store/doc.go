// Package store holds a parameter server's parameters and the updaters that
// apply pushed gradients to them.
//
// # Tables
//
// A [Table] maps each uint64 key to a fixed-width vector of Dim values of
// type V (float32 or float64) and, when the table is built with a positive
// state width, to Dim*StateWidth optimizer state values. It is an
// open-addressing hash table with linear probing whose keys, values and
// state live in flat parallel slices. A slot of a dim=1 float32 table
// costs 12 bytes (8 for the key, 4 for the value) and the table keeps its
// load between 0.375 and 0.75, so a parameter costs 16 to 32 bytes, about
// 20 at ten million keys, against 30 to 38 for a Go map[uint64]float32.
// Optimizer state is counted separately (StateBytes). Keys are never
// deleted.
//
// Callers address parameters by slot: Lookup and Insert return a slot, and
// Vals and State return the slot's values and state as slices that alias the
// table. An Insert that grows the table moves every key to a new slot and
// reallocates the slices, so slots and slices obtained before it are stale.
// Call Reserve before inserting a batch to make the batch's slots stable:
//
//	if err := t.Reserve(len(keys)); err != nil {
//		return err
//	}
//	for i, k := range keys {
//		slot, _ := t.Insert(k) // no growth: Reserve made room
//		upd.Apply(t.Vals(slot), t.State(slot), grads[i*dim:(i+1)*dim])
//	}
//
// For a whole request, [Table.Update] (insert what is missing and apply the
// gradients) and [Table.Gather] (copy the values of keys out) do the same
// as those loops, bit for bit, faster on tables larger than the cache:
// they hash and load the slots of 16 keys at a time before probing any,
// so that the cache misses overlap, and apply the sum updater without a
// call per key. Update can record each key's slot, and [Table.ValsAt]
// reads values by those slots while [Table.Generation] is unchanged.
// An Update or Gather of 65,536 keys or more on a hash table runs on as
// many goroutines as the processors the process may use (at most 8),
// each on a run of the keys; Update only for keys in strictly ascending
// order (as a request's are), with this package's updaters and no init
// function. No key is in two runs, so the values are still the loops',
// bit for bit, though a key may land in another slot. Tables of 8 MiB
// and more ask Linux for transparent huge pages.
//
// A table whose keys lie in a known range [base, base+n) can address them
// directly instead ([Table.UseDenseRange]): key k in slot k-base, no hash
// and no probe, neighbouring keys in neighbouring memory, the slices for
// the whole range allocated at once. That is a server's share of a
// range-partitioned key space with a bounded dimension, where psnode's
// store handler uses it when the range fits in 256 MiB. A key outside
// the range turns the table into a hash table of the keys it holds.
//
// A table can also choose for itself ([Table.AutoDense]): whenever it
// must grow, or take a key outside its dense range, it lays its keys out
// densely over a range that covers them when that range fills no more
// than three quarters of the slots a hash table of the same keys would
// take. Keys that crowd a range, as feature ids 1..n do, then cost no
// hash and no probe, and never more memory than hashing. Otherwise it
// hashes them, placing each key by its order between the smallest and
// the largest key: keys spread evenly over a wide space, as hashed
// feature ids are, fill the slots as evenly as a hash would, and the
// ascending keys of a request fall in ascending slots, so that a large
// push reads the table in order rather than at random. Keys that crowd
// one part of that order are hashed with a mixer instead. psnode's store
// handler turns the choice on; [Table.Layout] names the one made.
//
// [VarTable] stores a value vector of any length per key, for handlers that
// receive per-key lengths. It is a Go map of slices, the slower path.
//
// Tables are not safe for concurrent use: a server applies the requests of
// its key range from one goroutine (which Update and Gather may split
// within a call).
//
// # Updaters
//
// An [Updater] applies a gradient to weights in place, keeping its optimizer
// state in the table's state slice: [Sum], [SGD], [AdaGrad], [FTRL] and
// [Adam]. Updaters are small configuration structs whose Apply methods are
// pure functions on slices; they do not allocate. [NewUpdater] builds one
// from a name and a parameter map, as read from a job's configuration.
package store
