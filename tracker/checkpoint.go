package tracker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/io/ckpt"
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

// prepareCheckpoints checks the checkpoint directory before the job
// starts and installs the committer. For a resumed job it finds the
// newest committed checkpoint whose files verify, and returns where it is
// and the epoch training resumes at; skipped checkpoints are logged.
func (l *localJob) prepareCheckpoints(ctx context.Context) error {
	spec := l.spec
	if spec.CheckpointDir == "" {
		if spec.Resume {
			return errors.New("tracker: --resume needs --checkpoint-dir")
		}
		return nil
	}
	fsys, dir, err := l.opts.Resolver.Resolve(ctx, spec.CheckpointDir)
	if err != nil {
		return fmt.Errorf("tracker: --checkpoint-dir %s: %w", spec.CheckpointDir, err)
	}
	if spec.Resume {
		m, err := ckpt.Latest(ctx, fsys, dir, true)
		for _, s := range m.Skipped {
			l.opts.Log.WithError(s.Err).WithField("checkpoint", s.N).Warn("checkpoint skipped")
		}
		if err != nil {
			return fmt.Errorf("tracker: --resume: no usable checkpoint in %s: %w", spec.CheckpointDir, err)
		}
		if m.Servers != spec.NumServers {
			return fmt.Errorf("tracker: --resume: checkpoint %d in %s was written by %d servers; this job has %d",
				m.N, spec.CheckpointDir, m.Servers, spec.NumServers)
		}
		// What is newer than the checkpoint resumed from is damaged or
		// was never committed; the resumed job writes those numbers anew.
		for _, sk := range m.Skipped {
			if sk.N > m.N {
				if err := fsys.RemoveAll(ctx, ckpt.Path(dir, sk.N)); err != nil {
					return fmt.Errorf("tracker: --resume: remove unusable checkpoint %d: %w", sk.N, err)
				}
				l.opts.Log.WithField("checkpoint", sk.N).Warn("unusable checkpoint removed")
			}
		}
		l.resumeFrom = fsys.URI(ckpt.Path(dir, m.N))
		l.resumeEpoch = m.NextEpoch
		l.opts.Log.WithFields(logrus.Fields{"checkpoint": l.resumeFrom, "epoch": m.NextEpoch}).Info("resuming")
	} else if err := prepareDir(ctx, l.opts.Resolver, spec.CheckpointDir, "--checkpoint-dir", spec.Overwrite); err != nil {
		return err
	}
	keep := spec.CheckpointKeep
	if keep < 1 {
		keep = 3
	}
	l.state.SetCheckpointCommitter(func(ctx context.Context, c CheckpointInfo) error {
		m := ckpt.Manifest{
			Format: ckpt.ManifestFormat, N: c.N, Epoch: c.Epoch, NextEpoch: c.NextEpoch,
			Servers: spec.NumServers, Partitioner: c.Partitioner, MaxKey: c.MaxKey,
			Created: time.Now().UTC(), Job: spec.Name,
		}
		for _, f := range c.Files {
			m.Files = append(m.Files, ckpt.FileEntry{Name: f.Name, Bytes: f.Bytes, SHA256: f.SHA256})
		}
		if err := ckpt.Commit(ctx, fsys, dir, m); err != nil {
			return err
		}
		l.opts.Log.WithFields(logrus.Fields{"checkpoint": c.N, "epoch": c.Epoch}).Info("checkpoint committed")
		removed, err := ckpt.Prune(ctx, fsys, dir, keep)
		if err != nil {
			l.opts.Log.WithError(err).Warn("old checkpoints not removed")
		} else if len(removed) > 0 {
			l.opts.Log.WithField("removed", removed).Debug("old checkpoints removed")
		}
		return nil
	})
	return nil
}
