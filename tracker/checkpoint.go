package tracker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/io/ckpt"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
)

// CheckpointInfo describes a checkpoint whose server files are written,
// for the tracker to commit.
type CheckpointInfo struct {
	// N numbers the checkpoint: by convention the epochs completed.
	N int
	// Epoch is the number of epochs completed; NextEpoch is where training
	// resumes from this checkpoint.
	Epoch, NextEpoch int
	// Partitioner and MaxKey say how keys were spread over the servers; a
	// resumed job must spread them the same way.
	Partitioner string
	MaxKey      uint64
	Files       []CheckpointFile
}

// CheckpointFile is one server's file of a checkpoint.
type CheckpointFile struct {
	Name   string
	Bytes  int64
	SHA256 string
}

// ErrNoCheckpoints is returned to a commit when the job has no
// checkpoint directory.
var ErrNoCheckpoints = errors.New("tracker: the job has no --checkpoint-dir")

// SetCheckpointCommitter installs what commits checkpoints; without one,
// CommitCheckpoint fails with ErrNoCheckpoints.
func (s *State) SetCheckpointCommitter(f func(context.Context, CheckpointInfo) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commit = f
}

// CommitCheckpoint commits a checkpoint (see SetCheckpointCommitter).
func (s *State) CommitCheckpoint(ctx context.Context, c CheckpointInfo) error {
	s.mu.Lock()
	f := s.commit
	s.mu.Unlock()
	if f == nil {
		return ErrNoCheckpoints
	}
	return f(ctx, c)
}

// jobFiles is what a launcher does with a job's directories: it checks
// and prepares the output and the checkpoint directory before any task
// starts, commits checkpoints while the job runs, finds where to start
// again after losing a server, and commits the model at the end. The
// local launcher and the ApplicationMaster share it.
type jobFiles struct {
	spec JobSpec
	r    Resolver
	log  *logrus.Entry
	// ckptFS and ckptDir locate the checkpoints; ckptFS is nil without
	// --checkpoint-dir.
	ckptFS  dfs.FileSystem
	ckptDir string
	// from is where the tasks of the current run start.
	from resumePoint
	// restarts counts the runs started again after a lost server.
	restarts int
}

// resumePoint is where a run of a job starts: a committed checkpoint and
// the epoch after it, or (zero) from scratch.
type resumePoint struct {
	uri   string
	epoch int
}

// prepare readies the directories before any task starts: the output is
// checked (and cleared with --overwrite), and the checkpoint directory is
// checked, or for --resume searched for the newest committed checkpoint
// whose files verify. rerun marks a later attempt of the job's
// ApplicationMaster: the directories were prepared by an earlier one and
// hold only this job's files, so the output is cleared and the job starts
// from the newest usable checkpoint if there is one.
func (f *jobFiles) prepare(ctx context.Context, state *State, rerun bool) error {
	spec := f.spec
	if spec.Output != "" {
		if err := prepareDir(ctx, f.r, spec.Output, "--output", spec.Overwrite || rerun); err != nil {
			return err
		}
	}
	if spec.CheckpointDir == "" {
		if spec.Resume {
			return errors.New("tracker: --resume needs --checkpoint-dir")
		}
		return nil
	}
	fsys, dir, err := f.r.Resolve(ctx, spec.CheckpointDir)
	if err != nil {
		return fmt.Errorf("tracker: --checkpoint-dir %s: %w", spec.CheckpointDir, err)
	}
	f.ckptFS, f.ckptDir = fsys, dir
	switch {
	case spec.Resume || rerun:
		if f.from, err = f.latest(ctx, spec.Resume && !rerun); err != nil {
			return fmt.Errorf("tracker: resume: %w", err)
		}
	default:
		if err := prepareDir(ctx, f.r, spec.CheckpointDir, "--checkpoint-dir", spec.Overwrite); err != nil {
			return err
		}
	}
	state.SetCheckpointCommitter(f.commitCheckpoint)
	return nil
}

// latest returns where to resume: the newest committed checkpoint whose
// files verify. Newer checkpoints that are damaged or were never
// committed are removed, since the resumed job writes those numbers
// anew. Without a usable checkpoint it fails when required, and
// otherwise means from scratch.
func (f *jobFiles) latest(ctx context.Context, required bool) (resumePoint, error) {
	m, err := ckpt.Latest(ctx, f.ckptFS, f.ckptDir, true)
	for _, s := range m.Skipped {
		f.log.WithError(s.Err).WithField("checkpoint", s.N).Warn("checkpoint skipped")
	}
	if err != nil && (required || !errors.Is(err, ckpt.ErrNoCheckpoint)) {
		return resumePoint{}, fmt.Errorf("no usable checkpoint in %s: %w", f.spec.CheckpointDir, err)
	}
	if err == nil && m.Servers != f.spec.NumServers {
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
	p := resumePoint{uri: f.ckptFS.URI(ckpt.Path(f.ckptDir, m.N)), epoch: m.NextEpoch}
	f.log.WithFields(logrus.Fields{"checkpoint": p.uri, "epoch": p.epoch}).Info("resuming")
	return p, nil
}

// commitCheckpoint commits a checkpoint whose server files are written,
// then prunes the oldest beyond --checkpoint-keep.
func (f *jobFiles) commitCheckpoint(ctx context.Context, c CheckpointInfo) error {
	m := ckpt.Manifest{
		Format: ckpt.ManifestFormat, N: c.N, Epoch: c.Epoch, NextEpoch: c.NextEpoch,
		Servers: f.spec.NumServers, Partitioner: c.Partitioner, MaxKey: c.MaxKey,
		Created: time.Now().UTC(), Job: f.spec.Name,
	}
	for _, cf := range c.Files {
		m.Files = append(m.Files, ckpt.FileEntry{Name: cf.Name, Bytes: cf.Bytes, SHA256: cf.SHA256})
	}
	if err := ckpt.Commit(ctx, f.ckptFS, f.ckptDir, m); err != nil {
		return err
	}
	f.log.WithFields(logrus.Fields{"checkpoint": c.N, "epoch": c.Epoch}).Info("checkpoint committed")
	keep := f.spec.CheckpointKeep
	if keep < 1 {
		keep = 3
	}
	removed, err := ckpt.Prune(ctx, f.ckptFS, f.ckptDir, keep)
	if err != nil {
		f.log.WithError(err).Warn("old checkpoints not removed")
	} else if len(removed) > 0 {
		f.log.WithField("removed", removed).Debug("old checkpoints removed")
	}
	return nil
}

// restartPoint is where the whole job starts again after lost (the
// scheduler or a server, named) failed: a parameter-server job cannot go
// on without its scheduler or with a server's parameters gone, so every
// task starts again from the newest usable checkpoint, or from scratch
// when none is committed yet. The job starts again at most MaxAttempts-1
// times in all, whatever the cause. Without --checkpoint-dir the job fails,
// unless training had not begun (no worker asked for input yet: a
// scheduler that could not bind its port, say), when nothing is lost by
// starting from scratch.
func (f *jobFiles) restartPoint(ctx context.Context, lost string, trained bool) (resumePoint, error) {
	if f.restarts+1 >= f.spec.MaxAttempts {
		return resumePoint{}, fmt.Errorf("%s, and the job was started again %d times already: --max-attempts %d allows %d", lost, f.restarts, f.spec.MaxAttempts, f.spec.MaxAttempts-1)
	}
	if f.ckptFS == nil && !trained {
		f.restarts++
		return resumePoint{}, nil
	}
	if f.ckptFS == nil {
		return resumePoint{}, fmt.Errorf("%s: a parameter-server job cannot go on without it, and this job has no --checkpoint-dir to start again from (give --checkpoint-dir and --checkpoint-interval to survive the loss of a server)", lost)
	}
	p, err := f.latest(ctx, false)
	if err != nil {
		return resumePoint{}, fmt.Errorf("%s, and the job cannot start again: %w", lost, err)
	}
	f.from = p
	f.restarts++
	return p, nil
}

// commitModel completes the model after a successful job: every server
// wrote its part; the manifest, with the tracker's account of the
// training (st), and then _SUCCESS mark it complete.
func (f *jobFiles) commitModel(ctx context.Context, st Status) error {
	if f.spec.Output == "" {
		return nil
	}
	tr := &model.Training{EpochRecords: st.EpochRecords, Metrics: st.Metrics, MetricsEpoch: st.MetricsEpoch,
		ResumedFrom: f.from.uri, Restarts: f.restarts, Started: st.Started, FirstData: st.FirstData}
	return model.Commit(ctx, model.ResolverFS{R: f.r}, f.spec.Output, f.spec.NumServers, model.Manifest{Job: f.spec.Name, Training: tr})
}
