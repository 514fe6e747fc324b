package job

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/ckpt"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/tracker"
)

// Resolver maps a URI onto a file system; *dfs.Resolver is one.
type Resolver interface {
	Resolve(ctx context.Context, uri string) (dfs.FileSystem, string, error)
}

// localResolver reaches local paths only, for jobs run without a Hadoop
// configuration.
func localResolver() Resolver { return dfs.NewResolver(conf.HadoopConf{}, "") }

// ErrOutputExists is wrapped by the error for an output (or checkpoint
// directory) that already holds files, when the job may not overwrite
// it.
var ErrOutputExists = errors.New("exists and is not empty (set Overwrite to replace it)")

// ErrResumeNeedsCheckpointDir is the error for Resume without a
// CheckpointDir.
var ErrResumeNeedsCheckpointDir = &FieldError{Field: "Resume", Problem: "needs CheckpointDir"}

// dirError is a FieldError about the directory of field.
func dirError(field, dir string, err error) error {
	return &FieldError{Field: field, Value: dir, Problem: err.Error(), Err: err}
}

// files is what a job does with its directories: it checks and prepares
// the output and the checkpoint directory before any task starts,
// commits checkpoints while the job runs, finds where to start again
// after losing a server, and commits the model at the end.
type files struct {
	spec JobSpec
	r    Resolver
	log  *logrus.Entry
	// ckptFS and ckptDir locate the checkpoints; ckptFS is nil without a
	// checkpoint directory.
	ckptFS  dfs.FileSystem
	ckptDir string
	// from is where the tasks of the current run start.
	from resumePoint
	// restarts counts the runs started again after a lost server.
	restarts int
	// stage is set when the job replaces a complete model: the tasks
	// write the new one there, beside Output, and commitModel puts it in
	// Output's place (see prepareOutput).
	stage *stagedOutput
	// made lists the directories prepare created, which dropEmpty
	// removes again if a job that did not succeed left them empty.
	made []madeDir
	// claims are the directories this job claimed (claim.go), since
	// when, and when it last renewed them; rerun takes over the claims
	// an earlier attempt of the ApplicationMaster made.
	claims         []heldClaim
	since, renewed time.Time
	rerun          bool
}

// stagedOutput is where a job that replaces a complete model writes the
// new one: dir, beside out, the output, on the same file system.
type stagedOutput struct {
	fsys     dfs.FileSystem
	out, dir string
	// uri is dir as the tasks are told it, in the form of Output.
	uri string
}

// madeDir is a directory a job created: its file system, its name there.
type madeDir struct {
	fsys dfs.FileSystem
	name string
}

// resumePoint is where a run of a job starts: a committed checkpoint, the
// epoch after it and the number of its servers, or (zero) from scratch.
type resumePoint struct {
	uri     string
	epoch   int
	servers int
}

// String says where a run starts: "from checkpoint URI (epoch N)".
func (p resumePoint) String() string {
	return fmt.Sprintf("from checkpoint %s (epoch %d)", p.uri, p.epoch)
}

// prepare readies the directories before any task starts: the output is
// checked (and cleared with Overwrite), and the checkpoint directory is
// checked, or for Resume searched for the newest committed checkpoint
// whose files verify. rerun marks a later attempt of the job's
// ApplicationMaster: the directories were prepared by an earlier one and
// hold only this job's files, so the output is cleared and the job starts
// from the newest usable checkpoint if there is one.
func (f *files) prepare(ctx context.Context, state *tracker.State, rerun bool) error {
	spec := f.spec
	f.rerun = rerun
	if spec.Output != "" {
		if err := f.prepareOutput(ctx, spec.Overwrite || rerun); err != nil {
			return err
		}
	}
	if spec.CheckpointDir == "" {
		if spec.Resume {
			return ErrResumeNeedsCheckpointDir
		}
		return nil
	}
	fsys, dir, err := f.r.Resolve(ctx, spec.CheckpointDir)
	if err != nil {
		return dirError("CheckpointDir", spec.CheckpointDir, err)
	}
	f.ckptFS, f.ckptDir = fsys, dir
	switch {
	case spec.Resume || rerun:
		// A later attempt of the AM is the same job, whose servers may
		// have changed (State.Scale); a job resumed by hand must have the
		// checkpoint's.
		fresh := spec.Resume && !rerun
		if err := checkClaim(ctx, fsys, dir, spec.CheckpointDir, "CheckpointDir", rerun); err != nil {
			return err
		}
		if f.from, err = f.latest(ctx, fresh, fresh); err != nil {
			return fmt.Errorf("job: resume: %w", err)
		}
		if err := f.takeClaim(ctx, fsys, dir, spec.CheckpointDir, "CheckpointDir"); err != nil {
			return err
		}
	default:
		if err := f.prepareDir(ctx, spec.CheckpointDir, "CheckpointDir", spec.Overwrite); err != nil {
			return err
		}
	}
	state.SetCheckpointCommitter(func(ctx context.Context, c tracker.CheckpointInfo) error {
		return f.commitCheckpoint(ctx, c, state.Servers())
	})
	if f.from.servers > 0 && spec.NumServers > 0 {
		state.SetServers(f.from.servers)
	}
	return nil
}

// stageSuffix ends the name of the directory beside the output where a
// job writes the model that replaces a complete one, and oldSuffix the
// name the old model takes for the moment of the swap. Both names start
// with a dot, which Hadoop's input formats and globs skip.
const (
	stageSuffix = ".spindle-new"
	oldSuffix   = ".spindle-old"
)

// prepareOutput readies the model's directory. An output that holds a
// complete model (its _SUCCESS) and may be replaced stays as it is until
// the new model is complete: the tasks write it into a directory beside
// the output, ".<name>.spindle-new" (emptied first: a job that was
// killed may have left it), and commitModel puts it in the output's
// place. So a job with Overwrite that fails, or is killed, leaves the
// model it was to replace as it was. Where that directory cannot be made
// (the output's parent is not the user's to write), or for any other
// output, the output is checked and cleared as prepareDir does.
func (f *files) prepareOutput(ctx context.Context, overwrite bool) error {
	out := f.spec.Output
	if overwrite {
		fsys, name, err := f.r.Resolve(ctx, out)
		if err != nil {
			return dirError("Output", out, err)
		}
		if stage := stageFor(ctx, fsys, name, out); stage != "" {
			made := len(f.made)
			err := f.prepareDir(ctx, stage, "Output", true)
			if err == nil {
				dir, _ := besideDir(name, stageSuffix)
				f.stage = &stagedOutput{fsys: fsys, out: name, dir: dir, uri: stage}
				f.log.WithFields(logrus.Fields{"output": out, "new model": stage}).
					Info("the model in the output stays until the new one is complete")
				return nil
			}
			f.made = f.made[:made]
			f.log.WithError(err).Warnf("the new model cannot be written beside %s: the old one goes now", out)
		}
	}
	return f.prepareDir(ctx, out, "Output", overwrite)
}

// stageFor is the directory beside out (a path or URI; name on fsys)
// where a job replacing the complete model in out writes the new one,
// "" when out holds no complete model or has no such directory.
func stageFor(ctx context.Context, fsys dfs.FileSystem, name, out string) string {
	if _, err := fsys.Stat(ctx, path.Join(name, model.SuccessFile)); err != nil {
		return ""
	}
	stage, _ := besideDir(out, stageSuffix)
	return stage
}

// StagedOutput returns the directory beside spec's Output where the job
// would write its model, replacing a complete one there (Overwrite, and
// Output holds _SUCCESS); "" when it would write into Output itself. A
// YARN client records it, so that a job killed before it could remove
// that directory does not leave it behind empty.
func StagedOutput(ctx context.Context, r Resolver, spec JobSpec) string {
	if spec.Output == "" || !spec.Overwrite {
		return ""
	}
	fsys, name, err := r.Resolve(ctx, spec.Output)
	if err != nil {
		return ""
	}
	return stageFor(ctx, fsys, name, spec.Output)
}

// besideDir names the directory beside dir (a path or URI) whose name is
// dir's with a dot before it and suffix after: "/m/lr" gives
// "/m/.lr.spindle-new". ok is false for a root or an empty name.
func besideDir(dir, suffix string) (string, bool) {
	dir = strings.TrimRight(dir, "/")
	i := strings.LastIndexByte(dir, '/')
	parent, base := dir[:i+1], dir[i+1:]
	if base == "" || base == "." || base == ".." || strings.HasSuffix(parent, "://") || strings.HasSuffix(base, ":") {
		return "", false
	}
	return parent + "." + base + suffix, true
}

// modelDir is the directory the tasks write the model to: the output, or
// the staging directory beside it.
func (f *files) modelDir() string {
	if f.stage != nil {
		return f.stage.uri
	}
	return f.spec.Output
}

// swapIn puts the new model, complete in the staging directory, in the
// output's place. The old model moves aside first (a directory is not
// renamed over another on HDFS), then the new one takes the output's
// name, then the old one goes: wherever this stops, each model is whole
// under one of the three names. When it fails, the new model stays where
// it is, complete (dropStage leaves it), and the old one goes back to
// the output if it had left it; the error says where each is.
func (f *files) swapIn(ctx context.Context) error {
	s := f.stage
	f.stage = nil
	old, _ := besideDir(s.out, oldSuffix)
	failed := func(what string, err error) error {
		return fmt.Errorf("job: the new model is complete in %s, but %s: %w", s.uri, what, err)
	}
	if err := s.fsys.RemoveAll(ctx, old); err != nil {
		return failed("what an earlier job left in "+s.fsys.URI(old)+" could not be removed", err)
	}
	if err := s.fsys.Rename(ctx, s.out, old); err != nil {
		return failed("the model it replaces could not be moved aside from "+f.spec.Output, err)
	}
	if err := s.fsys.Rename(ctx, s.dir, s.out); err != nil {
		where := "back in " + f.spec.Output
		if rerr := s.fsys.Rename(ctx, old, s.out); rerr != nil {
			where = "in " + s.fsys.URI(old)
		}
		return failed(fmt.Sprintf("it could not be moved to %s (the model it was to replace is %s)", f.spec.Output, where), err)
	}
	if err := s.fsys.RemoveAll(ctx, old); err != nil {
		f.log.WithError(err).Warnf("the model replaced, moved to %s, could not be removed", s.fsys.URI(old))
	}
	return nil
}

// dropStage removes the staging directory and the new model's parts in
// it, after a job that did not succeed: the output keeps the model the
// job was to replace. It is best effort, as dropEmpty.
func (f *files) dropStage(ctx context.Context) {
	if s := f.stage; s != nil {
		if err := s.fsys.RemoveAll(ctx, s.dir); err != nil {
			f.log.WithError(err).Warnf("could not remove %s, where the job wrote a model it did not complete", s.uri)
		}
	}
}

// latest returns where to resume: the newest committed checkpoint whose
// files verify. Newer checkpoints that are damaged or were never
// committed are removed, since the resumed job writes those numbers
// anew. Without a usable checkpoint it fails when required, and
// otherwise means from scratch. With sameServers the checkpoint must
// have been written by the spec's servers; without, a job with servers
// starts again with the checkpoint's (it scaled since the start).
func (f *files) latest(ctx context.Context, required, sameServers bool) (resumePoint, error) {
	m, err := ckpt.Latest(ctx, f.ckptFS, f.ckptDir, true)
	for _, s := range m.Skipped {
		f.log.WithError(s.Err).WithField("checkpoint", s.N).Warn("checkpoint skipped")
	}
	if err != nil && (required || !errors.Is(err, ckpt.ErrNoCheckpoint)) {
		return resumePoint{}, fmt.Errorf("no usable checkpoint in %s: %w", f.spec.CheckpointDir, err)
	}
	if want := f.spec.checkpointWriters(); err == nil && m.Servers != want && (sameServers || f.spec.NumServers == 0) {
		return resumePoint{}, fmt.Errorf("checkpoint %d in %s was written by %d servers; this job has %d",
			m.N, f.spec.CheckpointDir, m.Servers, f.spec.NumServers)
	}
	for _, sk := range m.Skipped {
		if sk.N > m.N {
			if err := f.ckptFS.RemoveAll(ctx, ckpt.Path(f.ckptDir, sk.N)); err != nil {
				return resumePoint{}, fmt.Errorf("remove unusable checkpoint %d: %w", sk.N, err)
			}
			f.log.WithField("checkpoint", sk.N).Warn("unusable checkpoint removed")
		}
	}
	if err != nil {
		f.log.Info("no committed checkpoint yet: starting from scratch")
		return resumePoint{}, nil
	}
	p := resumePoint{uri: f.ckptFS.URI(ckpt.Path(f.ckptDir, m.N)), epoch: m.NextEpoch, servers: m.Servers}
	f.log.WithFields(logrus.Fields{"checkpoint": p.uri, "epoch": p.epoch}).Info("resuming")
	return p, nil
}

// commitCheckpoint commits a checkpoint whose server files are written,
// then prunes the oldest beyond CheckpointKeep. servers is the job's
// number of servers now (tracker.State.Servers).
func (f *files) commitCheckpoint(ctx context.Context, c tracker.CheckpointInfo, servers int) error {
	m := ckpt.Manifest{
		Format: ckpt.ManifestFormat, N: c.N, Epoch: c.Epoch, NextEpoch: c.NextEpoch,
		Servers: f.checkpointServers(c.Files, servers), Partitioner: c.Partitioner, MaxKey: c.MaxKey,
		Created: time.Now().UTC(), Job: f.spec.Name,
	}
	for _, cf := range c.Files {
		m.Files = append(m.Files, ckpt.FileEntry{Name: cf.Name, Bytes: cf.Bytes, SHA256: cf.SHA256})
	}
	if err := ckpt.Commit(ctx, f.ckptFS, f.ckptDir, m); err != nil {
		return err
	}
	f.log.WithFields(logrus.Fields{"checkpoint": c.N, "epoch": c.Epoch}).Info("checkpoint committed")
	keep := f.spec.checkpointKeep()
	removed, err := ckpt.Prune(ctx, f.ckptFS, f.ckptDir, keep)
	if err != nil {
		f.log.WithError(err).Warn("old checkpoints not removed")
	} else if len(removed) > 0 {
		f.log.WithField("removed", removed).Debug("old checkpoints removed")
	}
	return nil
}

// checkpointServers is the number of servers that wrote a checkpoint of
// files: in a job with servers, one more than the highest rank a file
// names (ckpt.TableFileName), which is the job's number as of the
// checkpoint even when it scaled since, or servers when no file names
// one; the one worker that writes them in a collective job.
func (f *files) checkpointServers(files []tracker.CheckpointFile, servers int) int {
	if f.spec.NumServers == 0 {
		return f.spec.checkpointWriters()
	}
	n := 0
	for _, cf := range files {
		if _, rank, ok := ckpt.ParseTableFileName(cf.Name); ok {
			n = max(n, rank+1)
		}
	}
	if n == 0 {
		return servers
	}
	return n
}

// restartPoint is where the whole job starts again after lost (the
// scheduler or a server, named) failed: a parameter-server job cannot go
// on without its scheduler or with a server's parameters gone, so every
// task starts again from the newest usable checkpoint, or from scratch
// when none is committed yet. With asked, lost is instead a task that
// asked for the restart (conf.ExitRestartJob) and is not itself lost.
// The job starts again at most MaxAttempts-1 times in all, whatever the
// cause. Without a checkpoint directory the job fails, unless training
// had not begun (no worker asked for input yet: a scheduler that could
// not bind its port, say), when nothing is lost by starting from scratch.
// When both stop it, the error names the missing checkpoint directory:
// more attempts would not have saved the job.
func (f *files) restartPoint(ctx context.Context, lost string, trained, asked bool) (resumePoint, error) {
	if f.ckptFS == nil && trained {
		switch {
		case asked:
			return resumePoint{}, fmt.Errorf("%s, and this job has no CheckpointDir to start again from (set CheckpointDir and CheckpointInterval for the job to start again from its last checkpoint)", lost)
		case f.spec.Collective:
			return resumePoint{}, fmt.Errorf("%s: the workers of a collective job cannot go on without it, and this job has no CheckpointDir to start again from (set CheckpointDir and CheckpointInterval to survive the loss of a worker)", lost)
		default:
			return resumePoint{}, fmt.Errorf("%s: a parameter-server job cannot go on without it, and this job has no CheckpointDir to start again from (set CheckpointDir and CheckpointInterval to survive the loss of a server)", lost)
		}
	}
	if f.restarts+1 >= f.spec.MaxAttempts {
		return resumePoint{}, fmt.Errorf("%s, and the job was started again %d times already: MaxAttempts %d allows %d", lost, f.restarts, f.spec.MaxAttempts, f.spec.MaxAttempts-1)
	}
	if f.ckptFS == nil {
		f.restarts++
		f.from = resumePoint{}
		return resumePoint{}, nil
	}
	p, err := f.latest(ctx, false, false)
	if err != nil {
		return resumePoint{}, fmt.Errorf("%s, and the job cannot start again: %w", lost, err)
	}
	f.from = p
	f.restarts++
	return p, nil
}

// commitModel completes the model after a successful job: every server
// of the last epoch wrote its part (st.Servers, which scaling changes
// from the spec's number); the manifest, with the tracker's account of
// the training (st), and then _SUCCESS mark it complete.
func (f *files) commitModel(ctx context.Context, st tracker.Status) error {
	if f.spec.Output == "" {
		return nil
	}
	tr := &model.Training{EpochRecords: st.EpochRecords, Metrics: st.Metrics, MetricsEpoch: st.MetricsEpoch,
		ResumedFrom: f.from.uri, Restarts: f.restarts, Started: st.Started, FirstData: st.FirstData,
		LocatedShards: st.LocatedGiven, NodeLocalShards: st.LocalGiven}
	if err := model.Commit(ctx, model.ResolverFS{R: f.r}, f.modelDir(), st.Servers, model.Manifest{Job: f.spec.Name, Training: tr}); err != nil {
		return err
	}
	if s := f.stage; s != nil {
		if err := f.swapIn(ctx); err != nil {
			return err
		}
		for i := range f.claims { // it moved with the new model
			if c := &f.claims[i]; c.fsys == s.fsys && c.dir == s.dir {
				c.dir = s.out
			}
		}
	}
	return nil
}

// prepareDir makes sure a job can write into dir (a path or URI, the
// value of field) before anything starts: an existing non-empty
// directory is refused unless overwrite, in which case it is emptied; a
// file in the way is refused; the directory is created, so that a
// permission problem shows now and names the path, and recorded in
// f.made when it did not exist.
func (f *files) prepareDir(ctx context.Context, dir, field string, overwrite bool) error {
	fsys, name, exists, nonEmpty, err := checkDir(ctx, f.r, dir, field, overwrite, f.rerun)
	if err != nil {
		return err
	}
	if err := fsys.MkdirAll(ctx, name, 0o755); err != nil {
		return dirError(field, dir, err)
	}
	if !exists {
		f.made = append(f.made, madeDir{fsys, name})
	}
	// Claimed before it is cleared: a job that claims it at the same
	// time clears nothing of this one's.
	if err := f.takeClaim(ctx, fsys, name, dir, field); err != nil {
		return err
	}
	if nonEmpty {
		if err := clearBut(ctx, fsys, name, isClaim); err != nil {
			return dirError(field, dir, fmt.Errorf("clear it: %w", err))
		}
	}
	return nil
}

// clearBut removes everything in directory name but the entries keep
// reports.
func clearBut(ctx context.Context, fsys dfs.FileSystem, name string, keep func(string) bool) error {
	entries, err := fsys.ReadDir(ctx, name)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !keep(e.Name()) {
			if err := fsys.RemoveAll(ctx, path.Join(name, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// dropEmpty removes each directory prepare created that is still empty,
// after a job that did not succeed: a failed job leaves no empty output
// or checkpoint directory behind. A directory with anything in it (a
// checkpoint, a part of an unfinished model, which has no _SUCCESS) is
// kept, as is one the user made. It is best effort: a failure is
// logged, not returned, and ctx bounds it.
func (f *files) dropEmpty(ctx context.Context) {
	f.releaseClaims(ctx)
	for _, d := range f.made {
		if _, err := dfs.RemoveEmptyDir(ctx, d.fsys, d.name); err != nil {
			f.log.WithError(err).Warnf("could not remove %s, which the job made and left empty", d.fsys.URI(d.name))
		}
	}
}

// checkDir is prepareDir's checks, changing nothing: it reports whether
// dir exists, and whether it holds files (allowed only with overwrite).
// Another running job's claim on it is refused unless takeOver (claim.go);
// a claim is not counted among its files.
func checkDir(ctx context.Context, r Resolver, dir, field string, overwrite, takeOver bool) (fsys dfs.FileSystem, name string, exists, nonEmpty bool, err error) {
	fsys, name, err = r.Resolve(ctx, dir)
	if err != nil {
		return nil, "", false, false, dirError(field, dir, err)
	}
	fi, err := fsys.Stat(ctx, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fsys, name, false, false, nil
	case err != nil:
		return nil, "", false, false, dirError(field, dir, err)
	case !fi.IsDir():
		return nil, "", false, false, dirError(field, dir, errors.New("exists and is a file, not a directory"))
	}
	if err := checkClaim(ctx, fsys, name, dir, field, takeOver); err != nil {
		return nil, "", false, false, err
	}
	entries, err := fsys.ReadDir(ctx, name)
	if err != nil {
		return nil, "", false, false, dirError(field, dir, err)
	}
	entries = slices.DeleteFunc(entries, func(e fs.FileInfo) bool { return isClaim(e.Name()) })
	switch {
	case len(entries) > 0 && !overwrite && field == "CheckpointDir":
		// A job may also go on from them.
		return nil, "", false, false, &FieldError{Field: field, Value: dir, Err: ErrOutputExists,
			Problem: "exists and is not empty (set Resume to go on from its newest checkpoint, or set Overwrite to clear it)"}
	case len(entries) > 0 && !overwrite:
		return nil, "", false, false, dirError(field, dir, ErrOutputExists)
	}
	return fsys, name, true, len(entries) > 0, nil
}

// Check checks, changing nothing, what Run would refuse before starting
// spec: the output and the checkpoint directory, a Resume without a
// committed checkpoint, and inputs that match no file (planned with
// planner). ps-submit runs it on the client before it submits a YARN
// application, so that such mistakes show at once; the
// ApplicationMaster prepares the directories itself.
func Check(ctx context.Context, spec JobSpec, r Resolver, planner tracker.Planner) error {
	if spec.Output != "" {
		if _, _, _, _, err := checkDir(ctx, r, spec.Output, "Output", spec.Overwrite, false); err != nil {
			return err
		}
	}
	switch {
	case spec.CheckpointDir == "" && spec.Resume:
		return ErrResumeNeedsCheckpointDir
	case spec.Resume:
		fsys, dir, err := r.Resolve(ctx, spec.CheckpointDir)
		if err != nil {
			return dirError("CheckpointDir", spec.CheckpointDir, err)
		}
		if err := checkClaim(ctx, fsys, dir, spec.CheckpointDir, "CheckpointDir", false); err != nil {
			return err
		}
		if _, err := ckpt.Latest(ctx, fsys, dir, false); err != nil {
			return &FieldError{Field: "Resume", Problem: "no usable checkpoint in " + spec.CheckpointDir + ": " + err.Error(), Err: err}
		}
	case spec.CheckpointDir != "":
		if _, _, _, _, err := checkDir(ctx, r, spec.CheckpointDir, "CheckpointDir", spec.Overwrite, false); err != nil {
			return err
		}
	}
	shards, err := planShards(ctx, spec, planner)
	if err != nil || len(shards) == 0 {
		return err
	}
	// What keeps the workers from opening the input fails the job now:
	// its first file is opened, and closed.
	fsys, name, err := r.Resolve(ctx, shards[0].URI)
	if err == nil {
		var f dfs.File
		if f, err = fsys.Open(ctx, name); err == nil {
			f.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("job: Inputs: %w", err)
	}
	return nil
}

// planShards cuts spec's inputs into shards with planner; a job without
// inputs has none.
func planShards(ctx context.Context, spec JobSpec, planner tracker.Planner) ([]tracker.Shard, error) {
	if len(spec.Inputs) == 0 {
		return nil, nil
	}
	if planner == nil {
		return nil, errors.New("job: the job has inputs but no planner to cut them into shards")
	}
	shards, err := planner(ctx, spec.Inputs, spec.splitSize())
	if err != nil {
		return nil, fmt.Errorf("job: Inputs: %w", err)
	}
	if len(shards) == 0 {
		return nil, fmt.Errorf("job: Inputs: %s: %w", strings.Join(spec.Inputs, ", "), ErrEmptyInput)
	}
	return shards, nil
}

// ErrEmptyInput is wrapped by the error of a job whose inputs name only
// empty files: trained on nothing, its model would be the initial one.
var ErrEmptyInput = errors.New("every file it names is empty: no data to read")

// dropEmptyTimeout bounds dropEmpty after a run, whose own context may
// have ended (a killed job).
const dropEmptyTimeout = 30 * time.Second
