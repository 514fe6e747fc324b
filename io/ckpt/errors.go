package ckpt

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt is wrapped by every error that reports a damaged
	// checkpoint: a server file that is truncated, fails its CRC, has a
	// bad header or holds another element type than the reader's (see
	// CorruptError), a manifest that does not parse or validate, and a
	// committed checkpoint whose files are missing or do not match the
	// sizes and checksums its manifest lists.
	ErrCorrupt = errors.New("ckpt: corrupt checkpoint")
	// ErrNoCheckpoint is returned by Latest when the checkpoint directory
	// is missing, empty, or holds no checkpoint that can be loaded.
	ErrNoCheckpoint = errors.New("ckpt: no usable checkpoint")
)

// CorruptError reports a checkpoint file that cannot be trusted. It wraps
// ErrCorrupt.
type CorruptError struct {
	// Path is the file's full URI (dfs.FileSystem.URI).
	Path string
	// Offset is the byte offset of the problem in the file, or -1 when
	// the problem concerns the file as a whole (its size or checksum).
	Offset int64
	// Reason says what is wrong, such as "crc mismatch".
	Reason string
}

func (e *CorruptError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("ckpt: %s: corrupt at offset %d: %s", e.Path, e.Offset, e.Reason)
	}
	return fmt.Sprintf("ckpt: %s: corrupt: %s", e.Path, e.Reason)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// corrupt returns a *CorruptError; off is -1 when no offset applies.
func corrupt(uri string, off int64, format string, args ...any) error {
	return &CorruptError{Path: uri, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// Skipped says why Latest passed over a checkpoint newer than the one it
// returned. Its Error method reads like "checkpoint 3 skipped: ckpt:
// file:///ckpt/3/server-1: corrupt: sha256 mismatch (...)".
type Skipped struct {
	// N is the number of the checkpoint passed over.
	N int
	// Err is the reason. It wraps fs.ErrNotExist when the checkpoint is
	// not committed (it has no manifest; it may still be being written),
	// ErrCorrupt when it is committed but damaged, and
	// errors.ErrUnsupported when its manifest has a format this package
	// does not know.
	Err error
}

func (s Skipped) Error() string { return fmt.Sprintf("checkpoint %d skipped: %v", s.N, s.Err) }

// Unwrap returns s.Err.
func (s Skipped) Unwrap() error { return s.Err }
