package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/examples/dense/dense"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/split"
	"github.com/spindle-ps/spindle/tracker"
)

// loadPlan reads every shard of the job's input, in the tracker's plan
// order, into memory: each worker holds the whole training set, so that
// every global batch is the same whatever the number of workers. It
// returns the records of each shard too, for the tracker's accounting.
func loadPlan(ctx context.Context, tc *tracker.Client, res split.Resolver, classes int) (*dense.Data, []tracker.Shard, []int64, error) {
	plan, err := tc.Plan(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(plan) == 0 {
		return nil, nil, nil, errors.New("the job has no input: give ps-submit --input")
	}
	data := &dense.Data{}
	counts := make([]int64, len(plan))
	for i, sh := range plan {
		before := data.Len()
		if err := readSplit(ctx, res, sh.Split(), classes, data); err != nil {
			return nil, nil, nil, fmt.Errorf("shard %d: %w", sh.ID, err)
		}
		counts[i] = int64(data.Len() - before)
	}
	if data.Len() == 0 {
		return nil, nil, nil, errors.New("the input holds no examples")
	}
	return data, plan, counts, nil
}

// readSplit appends the examples of s to data; an error names the file,
// the line and its byte offset.
func readSplit(ctx context.Context, res split.Resolver, s split.Split, classes int, data *dense.Data) error {
	lr, err := split.Open(ctx, res, s, split.ReaderOptions{})
	if err != nil {
		return err
	}
	defer lr.Close()
	for {
		line, off, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(line) == 0 {
			continue
		}
		if err := data.ParseLine(line, classes); err != nil {
			n, _ := lr.LineAt(off)
			return fmt.Errorf("%s: %w", split.Place(lr.URI(), n, off), err)
		}
	}
}

// readAll reads every example of the files uri names (a path, glob or
// directory; local or HDFS).
func readAll(ctx context.Context, res split.Resolver, uri string, classes int) (*dense.Data, error) {
	splits, err := split.Plan(ctx, res, []string{uri}, 1<<62)
	if err != nil {
		return nil, err
	}
	data := &dense.Data{}
	for _, s := range splits {
		if err := readSplit(ctx, res, s, classes, data); err != nil {
			return nil, err
		}
	}
	if data.Len() == 0 {
		return nil, fmt.Errorf("%s holds no examples", uri)
	}
	return data, nil
}

// readLocal reads a local csv file.
func readLocal(ctx context.Context, name string, classes int) (*dense.Data, error) {
	return readAll(ctx, dfs.NewResolver(conf.HadoopConf{}, ""), name, classes)
}
