package psnode

import "context"

// Where tables go: checkpoints, restore and model export are psnode's, but
// the bytes are written by an implementation in io (io/ckpt, io/model),
// which psnode never imports. The types the interfaces below exchange are
// aliases of unnamed types, so that an implementation declares its methods
// with its own aliases of the same types and satisfies the interfaces
// without importing psnode.

// TableSnapshot is one server's records of one table, as psnode hands them
// to a CheckpointStore or a ModelWriter. It is valid only during the call
// it is passed to; pushes to the table wait until that call returns, so
// the records are a consistent copy.
type TableSnapshot = interface {
	// Name returns the table's name.
	Name() string
	// Elem returns the element type of the table's values: "float32" or
	// "float64".
	Elem() string
	// Width returns the number of values per key.
	Width() int
	// StateWidth returns the updater's number of state values per value.
	StateWidth() int
	// Len returns the number of records Range yields.
	Len() int
	// Range yields every record in ascending key order: the key, its
	// Width values and its Width*StateWidth updater state values, widened
	// to float64 (exactly: a float32 table's values convert back without
	// loss). The slices are reused between records. Range stops when
	// yield returns false.
	Range(yield func(key uint64, vals, state []float64) bool)
}

// CheckpointFile names a file of a checkpoint with its size and SHA-256
// (lowercase hex), as the checkpoint's manifest lists it.
type CheckpointFile = struct {
	Name   string
	Bytes  int64
	SHA256 string
}

// CheckpointCommit describes a checkpoint whose files are all written, for
// the committer: N numbers it (by convention the epochs completed), Epoch
// is the epochs completed and NextEpoch where a resumed job starts;
// Partitioner and MaxKey say how keys were spread over the servers ("hash",
// "consistent" or "range", or "tables" when the tables differ: the checkpoint's
// tables.json has each table's).
type CheckpointCommit = struct {
	N, Epoch, NextEpoch int
	Partitioner         string
	MaxKey              uint64
	Files               []CheckpointFile
}

// CheckpointStore writes a server's files of a checkpoint and reads them
// back. io/ckpt's TableStore implements it over local files and HDFS. Its
// methods may be called from several goroutines.
type CheckpointStore interface {
	// WriteTable writes server rank's records of table t into checkpoint n
	// (under the store's checkpoint directory), all or nothing, and
	// returns the file's entry for the manifest.
	WriteTable(ctx context.Context, n, rank int, t TableSnapshot) (CheckpointFile, error)
	// WriteFile writes a small file of checkpoint n (psnode writes the
	// tables' description, tables.json, from server 0), all or nothing.
	WriteFile(ctx context.Context, n int, name string, data []byte) (CheckpointFile, error)
	// ReadTable reads server rank's records of table from the committed
	// checkpoint at from (a checkpoint's directory, conf.Job.ResumeFrom),
	// verifying the whole file before it calls fn for the first record.
	// It returns the file's width and state width; fn's slices are reused.
	ReadTable(ctx context.Context, from string, rank int, table string, fn func(key uint64, vals, state []float64) error) (width, stateWidth int, err error)
	// ReadFile returns the small file name of the checkpoint at from, at
	// most limit bytes; a missing file is an error wrapping
	// fs.ErrNotExist.
	ReadFile(ctx context.Context, from, name string, limit int64) ([]byte, error)
}

// CheckpointCommitter commits a checkpoint once every server's files are
// written: *tracker.Client implements it, asking the job's tracker to
// write the manifest.
type CheckpointCommitter interface {
	CommitTableCheckpoint(ctx context.Context, c CheckpointCommit) error
}

// ModelWriter writes a server's part of the model. io/model's TableWriter
// implements it (text or binary parts).
type ModelWriter interface {
	// WriteModel writes server rank's part of every table, all or
	// nothing per file. Rank 0 also describes the tables, so that the
	// launcher's commit can check every part and list the tables in the
	// model's manifest.
	WriteModel(ctx context.Context, rank int, tables []TableSnapshot) error
}
