// Package ckpt reads and writes checkpoints of the servers' parameter
// tables, on any dfs.FileSystem (local or HDFS).
//
// Checkpoint n under a checkpoint directory dir is the directory
// Path(dir, n), "<dir>/<n>", holding
//
//	<dir>/<n>/server-<rank>     one file per server (ServerFileName), written
//	                            under a temporary name and renamed
//	<dir>/<n>/_manifest.json    written last, by the committer
//
// Checkpoint n is committed exactly when its manifest exists and parses;
// an uncommitted or damaged checkpoint is never chosen for loading.
//
// # Checkpoints of named tables
//
// A job of psnode tables checkpoints every table of every server, each in
// its own server file, and a description of the tables:
//
//	<dir>/<n>/<table>.server-<rank>   one per table and server (TableFileName)
//	<dir>/<n>/tables.json             the tables' specs, from server 0
//	<dir>/<n>/_manifest.json          written last, by the committer
//
// TableStore writes and reads them for psnode (it implements
// psnode.CheckpointStore without importing psnode: the types it
// exchanges are aliases of the same unnamed types). A manifest must list,
// for every table it has files of, one file per server; a checkpoint of a
// single unnamed table lists server-<rank> files.
//
// # Usage
//
// Each server writes its table (a table's Range method is a records
// iterator) and reports the returned FileEntry to the committer (psnode's
// tables do this through TableStore):
//
//	name := path.Join(ckpt.Path(dir, n), ckpt.ServerFileName(rank))
//	h := ckpt.Header{Dim: t.Dim(), StateWidth: t.StateWidth(), Records: int64(t.Len())}
//	entry, err := ckpt.WriteServerFile(ctx, fsys, name, h, t.Range)
//
// Once every server has reported, the committer (the tracker) writes the
// manifest, then drops old checkpoints:
//
//	err := ckpt.Commit(ctx, fsys, dir, ckpt.Manifest{
//		Format: ckpt.ManifestFormat, N: n, Epoch: e, NextEpoch: e,
//		Servers: len(entries), Partitioner: "range", Files: entries, Created: now,
//	})
//	removed, err := ckpt.Prune(ctx, fsys, dir, 2)
//
// To resume, the tracker picks the newest checkpoint whose files check out,
// and each server loads its file:
//
//	m, err := ckpt.Latest(ctx, fsys, dir, true)
//	if errors.Is(err, ckpt.ErrNoCheckpoint) {
//		// start from scratch
//	}
//	for _, s := range m.Skipped {
//		log.WithError(s.Err).WithField("checkpoint", s.N).Warn("checkpoint skipped")
//	}
//	...
//	h, err := ckpt.ReadServerFile(ctx, fsys, path.Join(ckpt.Path(dir, m.N), ckpt.ServerFileName(rank)),
//		func(key uint64, vals, state []float32) error {
//			slot, _ := t.Insert(key)
//			copy(t.Vals(slot), vals)
//			copy(t.State(slot), state)
//			return nil
//		})
//
// ReadServerFile verifies the whole file (header, size and CRC-32C) before
// it delivers the first record, so a damaged file fails the load before
// any of it reaches the table.
//
// # Errors
//
// Damage — a truncated or altered server file, a manifest that does not
// parse, a committed checkpoint whose files do not match their manifest —
// is reported by errors wrapping ErrCorrupt that name the file's URI.
// Latest returns ErrNoCheckpoint when nothing is usable, and reports other
// I/O errors as they are, so that a transient failure is never taken for
// the absence of a checkpoint.
//
// The functions of this package are safe for concurrent use, as far as
// the FileSystem is; concurrent writers of the same file name, or
// committers of the same checkpoint, must be avoided by the caller.
package ckpt
