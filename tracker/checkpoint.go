package tracker

import (
	"context"
	"errors"
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
var ErrNoCheckpoints = errors.New("tracker: the job has no checkpoint directory")

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
