package tracker

import (
	"context"

	"github.com/spindle-ps/spindle/io/split"
)

// Planner cuts a job's inputs into shards of about splitSize bytes.
type Planner func(ctx context.Context, inputs []string, splitSize int64) ([]Shard, error)

// InputPlanner returns the Planner that cuts inputs (paths, directories,
// globs; local or HDFS) into shards with io/split, by the rule that a
// record belongs to the shard in which it starts.
func InputPlanner(r split.Resolver) Planner {
	return func(ctx context.Context, inputs []string, splitSize int64) ([]Shard, error) {
		splits, err := split.Plan(ctx, r, inputs, splitSize)
		if err != nil {
			return nil, err
		}
		out := make([]Shard, len(splits))
		for i, s := range splits {
			out[i] = Shard{ID: int64(i), URI: s.URI, Start: s.Start, Length: s.Length, FileSize: s.FileSize, Compressed: s.Compressed}
		}
		return out, nil
	}
}

// Split returns the io/split description of a shard, to open it.
func (s Shard) Split() split.Split {
	return split.Split{URI: s.URI, Start: s.Start, Length: s.Length, FileSize: s.FileSize, Compressed: s.Compressed}
}
