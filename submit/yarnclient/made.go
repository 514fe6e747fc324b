package yarnclient

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
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
// YARN kills its process a moment after asking it to end. So the client
// writes them into the staging directory (madeFile), and whoever removes
// the staging directory of an application that ended without succeeding
// (Submit's own kill, Kill, sweepStaging) removes first those of them
// that are still empty. A directory with anything in it (a checkpoint,
// the parts of an unfinished model, which has no _SUCCESS) is kept.
const (
	// madeFile lists the directories, one URI a line.
	madeFile = "made-dirs"
	// maxMadeFile bounds what is read of it.
	maxMadeFile = 64 << 10
)

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

// writeMade writes made into the staging directory dir of fsys, when
// there is any.
func writeMade(ctx context.Context, fsys dfs.FileSystem, dir string, made []string) error {
	if len(made) == 0 {
		return nil
	}
	w, err := fsys.Create(ctx, path.Join(dir, madeFile), dfs.CreateOptions{})
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, strings.Join(made, "\n")+"\n"); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// readMade reads the list writeMade wrote into the staging directory dir
// of fsys; nil when there is none or it cannot be read.
func readMade(ctx context.Context, fsys dfs.FileSystem, dir string) []string {
	f, err := fsys.Open(ctx, path.Join(dir, madeFile))
	if err != nil {
		return nil
	}
	defer f.Close()
	var made []string
	sc := bufio.NewScanner(io.LimitReader(f, maxMadeFile))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			made = append(made, l)
		}
	}
	return made
}

// dropEmpty removes each directory of made, which application app made,
// that is empty but for the claim app's ApplicationMaster left there
// (job.DropClaim), logging what it removed and what it could not (to
// log, when not nil); best effort, bounded by ctx.
func dropEmpty(ctx context.Context, r job.Resolver, app string, made []string, log *logrus.Entry) {
	if log == nil {
		l := logrus.New()
		l.Out = io.Discard
		log = logrus.NewEntry(l)
	}
	for _, d := range made {
		fsys, name, err := r.Resolve(ctx, d)
		if err != nil {
			continue
		}
		if err := job.DropClaim(ctx, fsys, name, app); err != nil {
			log.WithError(err).Warnf("could not remove the claim %s left in %s", app, d)
		}
		switch removed, err := dfs.RemoveEmptyDir(ctx, fsys, name); {
		case err != nil:
			log.WithError(err).Warnf("could not remove %s, which the job made and left empty", d)
		case removed:
			log.Infof("removed %s, which the job made and left empty", d)
		}
	}
}
