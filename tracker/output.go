package tracker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/ckpt"
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
	fsys, name, nonEmpty, err := checkDir(ctx, r, dir, flag, overwrite)
	if err != nil {
		return err
	}
	if nonEmpty {
		if err := fsys.RemoveAll(ctx, name); err != nil {
			return fmt.Errorf("tracker: %s %s: clear it: %w", flag, dir, err)
		}
	}
	if err := fsys.MkdirAll(ctx, name, 0o755); err != nil {
		return fmt.Errorf("tracker: %s %s: %w", flag, dir, err)
	}
	return nil
}

// checkDir is prepareDir's checks, changing nothing: it reports whether
// dir exists and holds files (allowed only with overwrite).
func checkDir(ctx context.Context, r Resolver, dir, flag string, overwrite bool) (fsys dfs.FileSystem, name string, nonEmpty bool, err error) {
	fsys, name, err = r.Resolve(ctx, dir)
	if err != nil {
		return nil, "", false, fmt.Errorf("tracker: %s %s: %w", flag, dir, err)
	}
	fi, err := fsys.Stat(ctx, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fsys, name, false, nil
	case err != nil:
		return nil, "", false, fmt.Errorf("tracker: %s %s: %w", flag, dir, err)
	case !fi.IsDir():
		return nil, "", false, fmt.Errorf("tracker: %s %s: exists and is a file, not a directory", flag, dir)
	}
	entries, err := fsys.ReadDir(ctx, name)
	if err != nil {
		return nil, "", false, fmt.Errorf("tracker: %s %s: %w", flag, dir, err)
	}
	if len(entries) > 0 && !overwrite {
		return nil, "", false, fmt.Errorf("%s %s: %w", flag, dir, ErrOutputExists)
	}
	return fsys, name, len(entries) > 0, nil
}

// CheckJob checks, changing nothing, what a launcher would refuse before
// starting spec: the output and the checkpoint directory (see prepare),
// a --resume without a committed checkpoint, and inputs that match no
// file (planned with planner). ps-submit runs it on
// the client before it submits a YARN application, so that such mistakes
// show at once; the ApplicationMaster prepares the directories itself.
func CheckJob(ctx context.Context, spec JobSpec, r Resolver, planner Planner) error {
	if spec.Output != "" {
		if _, _, _, err := checkDir(ctx, r, spec.Output, "--output", spec.Overwrite); err != nil {
			return err
		}
	}
	switch {
	case spec.CheckpointDir == "" && spec.Resume:
		return errors.New("tracker: --resume needs --checkpoint-dir")
	case spec.Resume:
		fsys, dir, err := r.Resolve(ctx, spec.CheckpointDir)
		if err != nil {
			return fmt.Errorf("tracker: --checkpoint-dir %s: %w", spec.CheckpointDir, err)
		}
		if _, err := ckpt.Latest(ctx, fsys, dir, false); err != nil {
			return fmt.Errorf("tracker: --resume: no usable checkpoint in %s: %w", spec.CheckpointDir, err)
		}
	case spec.CheckpointDir != "":
		if _, _, _, err := checkDir(ctx, r, spec.CheckpointDir, "--checkpoint-dir", spec.Overwrite); err != nil {
			return err
		}
	}
	_, err := planShards(ctx, spec, planner)
	return err
}

// splitSize is spec's shard size.
func splitSize(spec JobSpec) int64 {
	if spec.SplitSize == 0 {
		return DefaultSplitSize
	}
	return spec.SplitSize
}

// Resolver maps a URI onto a file system; *dfs.Resolver is one.
type Resolver interface {
	Resolve(ctx context.Context, uri string) (dfs.FileSystem, string, error)
}

// localResolver reaches local paths only, for jobs run without a Hadoop
// configuration.
func localResolver() Resolver { return dfs.NewResolver(conf.HadoopConf{}, "") }
