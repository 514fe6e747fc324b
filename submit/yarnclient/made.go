package yarnclient

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job"
)

// The directories a job makes: its output and checkpoint directory, when
// they did not exist at submission, and the directory beside the output
// where it writes a model that replaces a complete one
// (job.StagedOutput), are created by the ApplicationMaster before any
// task starts. A job that does not succeed removes them again
// when still empty (job.Job.Run); a killed ApplicationMaster cannot, as
// YARN kills its process a moment after asking it to end. Nor can it
// release the claims it keeps in the directories it writes (its output
// or the staged one, and its checkpoint directory, whether it made them
// or not), which would then keep the user's next job, a --resume after
// a kill, out of them for a minute. So the client writes both lists into
// the staging directory (madeFile, claimsFile), and whoever removes the
// staging directory of an application that ended without succeeding
// (Submit's own kill, Kill, sweepStaging) first drops the application's
// claims and removes the directories it made that are still empty. A
// directory with anything in it (a checkpoint, the parts of an
// unfinished model, which has no _SUCCESS) is kept.
const (
	// madeFile lists the directories the job makes, one URI a line.
	madeFile = "made-dirs"
	// claimsFile lists the directories it may claim, likewise.
	claimsFile = "claim-dirs"
	// maxDirsFile bounds what is read of either.
	maxDirsFile = 64 << 10
)

// jobDirs are the directories a job makes, and those it may claim.
type jobDirs struct {
	made, claimed []string
}

// newJobDirs returns the directories spec's job makes (those of its
// output, staged output and checkpoint directory that do not exist) and
// may claim (all three).
func newJobDirs(ctx context.Context, r job.Resolver, spec job.JobSpec) jobDirs {
	dirs := []string{spec.Output, spec.CheckpointDir, job.StagedOutput(ctx, r, spec)}
	d := jobDirs{made: absentDirs(ctx, r, dirs...)}
	for _, dir := range dirs {
		if dir != "" {
			d.claimed = append(d.claimed, dir)
		}
	}
	return d
}

// write writes d into the staging directory dir of fsys.
func (d jobDirs) write(ctx context.Context, fsys dfs.FileSystem, dir string) error {
	for file, dirs := range map[string][]string{madeFile: d.made, claimsFile: d.claimed} {
		if len(dirs) == 0 {
			continue
		}
		w, err := fsys.Create(ctx, path.Join(dir, file), dfs.CreateOptions{})
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, strings.Join(dirs, "\n")+"\n"); err != nil {
			w.Close()
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	return nil
}

// readJobDirs reads what jobDirs.write wrote into the staging directory
// dir of fsys; a list that is not there or cannot be read is empty.
func readJobDirs(ctx context.Context, fsys dfs.FileSystem, dir string) jobDirs {
	return jobDirs{made: readDirs(ctx, fsys, path.Join(dir, madeFile)), claimed: readDirs(ctx, fsys, path.Join(dir, claimsFile))}
}

// readDirs reads a list of directories, one a line, from file name.
func readDirs(ctx context.Context, fsys dfs.FileSystem, name string) []string {
	f, err := fsys.Open(ctx, name)
	if err != nil {
		return nil
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(io.LimitReader(f, maxDirsFile))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			dirs = append(dirs, l)
		}
	}
	return dirs
}

// drop drops the claims application app's ApplicationMaster left in d's
// directories (job.DropClaim), then removes each directory it made that
// is empty, logging what it removed and what it could not (to log, when
// not nil); best effort, bounded by ctx.
func (d jobDirs) drop(ctx context.Context, r job.Resolver, app string, log *logrus.Entry) {
	if log == nil {
		l := logrus.New()
		l.Out = io.Discard
		log = logrus.NewEntry(l)
	}
	for _, dir := range append(slices.Clone(d.claimed), d.made...) {
		if fsys, name, err := r.Resolve(ctx, dir); err == nil {
			if err := job.DropClaim(ctx, fsys, name, app); err != nil {
				log.WithError(err).Warnf("could not remove the claim %s left in %s", app, dir)
			}
		}
	}
	for _, dir := range d.made {
		fsys, name, err := r.Resolve(ctx, dir)
		if err != nil {
			continue
		}
		switch removed, err := dfs.RemoveEmptyDir(ctx, fsys, name); {
		case err != nil:
			log.WithError(err).Warnf("could not remove %s, which the job made and left empty", dir)
		case removed:
			log.Infof("removed %s, which the job made and left empty", dir)
		}
	}
}

// absentDirs returns those of dirs (URIs; "" skipped) that do not exist.
// A directory that cannot be checked is left out: it will not be
// removed.
func absentDirs(ctx context.Context, r job.Resolver, dirs ...string) []string {
	var out []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		fsys, name, err := r.Resolve(ctx, d)
		if err != nil {
			continue
		}
		if _, err := fsys.Stat(ctx, name); errors.Is(err, fs.ErrNotExist) {
			out = append(out, d)
		}
	}
	return out
}
