package tracker

import (
	"context"
	"errors"
	"fmt"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/split"
)

// DefaultResolver reaches local files and HDFS with the Hadoop
// configuration found the Hadoop way (HADOOP_CONF_DIR, YARN_CONF_DIR,
// HADOOP_HOME/etc/hadoop) and the user HADOOP_USER_NAME or the login.
func DefaultResolver(lookup conf.Lookup) (*dfs.Resolver, error) {
	hc, err := conf.LoadHadoopConf(lookup)
	if err != nil {
		return nil, err
	}
	user, err := hc.User(lookup)
	if err != nil {
		return nil, err
	}
	return dfs.NewResolver(hc, user), nil
}

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

// planShards cuts spec's inputs into shards with planner; a job without
// inputs has none.
func planShards(ctx context.Context, spec JobSpec, planner Planner) ([]Shard, error) {
	if len(spec.Inputs) == 0 {
		return nil, nil
	}
	if planner == nil {
		return nil, errors.New("tracker: the job has inputs but no planner to cut them into shards")
	}
	shards, err := planner(ctx, spec.Inputs, splitSize(spec))
	if err != nil {
		return nil, fmt.Errorf("tracker: plan the input: %w", err)
	}
	return shards, nil
}
