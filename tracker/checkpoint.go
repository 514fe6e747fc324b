package tracker

import (
	"context"
	"errors"
	"fmt"
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
	// Run is the run of the job (State.Run) of the worker that wrote it:
	// one of a run that ended is not committed.
	Run int
}

// CheckpointFile is one server's file of a checkpoint.
type CheckpointFile struct {
	Name   string
	Bytes  int64
	SHA256 string
}

// ErrNoCheckpoints is returned to a commit when the job has no
// checkpoint directory.
var ErrNoCheckpoints = errors.New("tracker: the job has no checkpoint directory")

// SetCheckpointCommitter installs what commits checkpoints; without one,
// CommitCheckpoint fails with ErrNoCheckpoints.
func (s *State) SetCheckpointCommitter(f func(context.Context, CheckpointInfo) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commit = f
}

// CommitCheckpoint commits a checkpoint (see SetCheckpointCommitter),
// unless the run it was written in ended (EndRun).
func (s *State) CommitCheckpoint(ctx context.Context, c CheckpointInfo) error {
	select {
	case s.committing <- struct{}{}:
		defer func() { <-s.committing }()
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	f := s.commit
	err := s.checkRunLocked(c.Run, 0)
	s.mu.Unlock()
	switch {
	case f == nil:
		return ErrNoCheckpoints
	case err != nil:
		return fmt.Errorf("commit checkpoint %d: %w", c.N, err)
	}
	return f(ctx, c)
}
