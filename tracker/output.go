package tracker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
)

// ErrOutputExists is wrapped by the error for an output that already
// holds files, when the job may not overwrite it.
var ErrOutputExists = errors.New("tracker: output exists and is not empty (pass --overwrite to replace it)")

// prepareDir makes sure a job can write into dir (a path or URI) before
// anything starts: an existing non-empty directory is refused unless
// overwrite, in which case it is emptied; a file in the way is refused;
// the directory is created, so that a permission problem shows now and
// names the path.
func prepareDir(ctx context.Context, r Resolver, dir, flag string, overwrite bool) error {
	fsys, name, err := r.Resolve(ctx, dir)
	if err != nil {
		return fmt.Errorf("tracker: %s %s: %w", flag, dir, err)
	}
	fi, err := fsys.Stat(ctx, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("tracker: %s %s: %w", flag, dir, err)
	case !fi.IsDir():
		return fmt.Errorf("tracker: %s %s: exists and is a file, not a directory", flag, dir)
	default:
		entries, err := fsys.ReadDir(ctx, name)
		if err != nil {
			return fmt.Errorf("tracker: %s %s: %w", flag, dir, err)
		}
		if len(entries) > 0 {
			if !overwrite {
				return fmt.Errorf("%s %s: %w", flag, dir, ErrOutputExists)
			}
			if err := fsys.RemoveAll(ctx, name); err != nil {
				return fmt.Errorf("tracker: %s %s: clear it: %w", flag, dir, err)
			}
		}
	}
	if err := fsys.MkdirAll(ctx, name, 0o755); err != nil {
		return fmt.Errorf("tracker: %s %s: %w", flag, dir, err)
	}
	return nil
}

// Resolver maps a URI onto a file system; *dfs.Resolver is one.
type Resolver interface {
	Resolve(ctx context.Context, uri string) (dfs.FileSystem, string, error)
}

// localResolver reaches local paths only, for jobs run without a Hadoop
// configuration.
func localResolver() Resolver { return dfs.NewResolver(conf.HadoopConf{}, "") }
