package feed

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spindle-ps/spindle/io/records"
	"github.com/spindle-ps/spindle/io/split"
)

// ReadAll reads every record of the files uri names (a path, glob or
// directory; local or HDFS) into memory, as for a held-out set. A uri
// that holds no records is an error.
func ReadAll(ctx context.Context, res split.Resolver, uri string, opts records.Options) ([]records.Example, error) {
	splits, err := split.Plan(ctx, res, []string{uri}, 1<<62)
	if err != nil {
		return nil, err
	}
	var out []records.Example
	for _, s := range splits {
		if out, err = readSplit(ctx, res, s, opts, out); err != nil {
			return nil, fmt.Errorf("%s: %w", s.URI, err)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no records", uri)
	}
	return out, nil
}

func readSplit(ctx context.Context, res split.Resolver, s split.Split, opts records.Options, out []records.Example) ([]records.Example, error) {
	src, err := split.Open(ctx, res, s, split.ReaderOptions{})
	if err != nil {
		return out, err
	}
	defer src.Close()
	rd, err := records.NewReader(src, opts)
	if err != nil {
		return out, err
	}
	for {
		var ex records.Example
		if err := rd.Next(&ex); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, ex)
	}
}
