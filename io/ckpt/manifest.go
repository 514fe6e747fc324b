package ckpt

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spindle-ps/spindle/io/dfs"
)

const (
	// ManifestFormat is the Format of the manifests this package writes
	// and reads.
	ManifestFormat = "spindle-checkpoint/1"
	// ManifestName is the name of the manifest in a checkpoint directory.
	// Its presence commits the checkpoint.
	ManifestName = "_manifest.json"

	// maxManifestBytes bounds the size of a manifest a reader accepts.
	maxManifestBytes = 64 << 20
	// maxServers bounds Manifest.Servers, the partitioners' limit on parts.
	maxServers = 1 << 20
	// verifyParallelism is how many files Latest checksums at once.
	verifyParallelism = 4
)

// Path returns the directory of checkpoint n under the checkpoint
// directory dir: "<dir>/<n>". Names are slash-separated (HDFS, POSIX).
func Path(dir string, n int) string { return path.Join(dir, strconv.Itoa(n)) }

// ServerFileName returns the name of the file of the server of rank rank
// in a checkpoint directory: "server-<rank>".
func ServerFileName(rank int) string { return "server-" + strconv.Itoa(rank) }

// TableFileName returns the name of the file of table's records on the
// server of rank rank in a checkpoint directory: "<table>.server-<rank>",
// or ServerFileName(rank) for the unnamed table "".
func TableFileName(table string, rank int) string {
	if table == "" {
		return ServerFileName(rank)
	}
	return table + "." + ServerFileName(rank)
}

// ParseTableFileName splits a name made by TableFileName into the table
// and the rank; ok is false for any other name.
func ParseTableFileName(name string) (table string, rank int, ok bool) {
	base := name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		table, base = name[:i], name[i+1:]
		if table == "" {
			return "", 0, false
		}
	}
	digits, found := strings.CutPrefix(base, "server-")
	if !found {
		return "", 0, false
	}
	r, err := strconv.Atoi(digits)
	if err != nil || r < 0 || strconv.Itoa(r) != digits {
		return "", 0, false
	}
	return table, r, true
}

// Range is the key range [Begin, Last] of one server, both ends included
// (so that a range can end at math.MaxUint64).
type Range struct {
	Begin uint64 `json:"begin,string"`
	Last  uint64 `json:"last,string"`
}

// Manifest describes a committed checkpoint. It is stored as JSON in
// "<dir>/<n>/_manifest.json"; uint64 values are JSON strings, so that
// readers whose numbers are float64 (jq, JavaScript) keep every digit.
type Manifest struct {
	// Format is ManifestFormat.
	Format string `json:"format"`
	// N is the checkpoint's number, the name of its directory; >= 0.
	N int `json:"n"`
	// Epoch is the number of epochs completed when the checkpoint was
	// taken; >= 0.
	Epoch int `json:"epoch"`
	// NextEpoch is the dispatch position: a job resumed from this
	// checkpoint starts dispatching at the beginning of this epoch; >= 0.
	NextEpoch int `json:"next_epoch"`
	// Servers is the number of servers, 1..2^20; the files of servers
	// 0..Servers-1 (ServerFileName) must be listed in Files.
	Servers int `json:"servers"`
	// Partitioner is the kind of partitioner that assigned keys to
	// servers, such as "range" or "hash".
	Partitioner string `json:"partitioner"`
	// MaxKey is the partitioner's key-space bound: keys are below it; 0
	// means the whole uint64 space.
	MaxKey uint64 `json:"max_key,string"`
	// Ranges optionally lists the key range of each server, in rank
	// order: empty, or one per server with Begin <= Last.
	Ranges []Range `json:"ranges,omitempty"`
	// Files lists the checkpoint's files with their sizes and checksums,
	// as WriteServerFile returned them. Names are unique base names in
	// the checkpoint directory, not starting with "." or "_".
	Files []FileEntry `json:"files"`
	// Created is when the checkpoint was committed, set by the caller.
	Created time.Time `json:"created"`
	// Job identifies the job that wrote the checkpoint.
	Job string `json:"job,omitempty"`
	// Extra holds further facts the caller wants kept with the checkpoint.
	Extra map[string]string `json:"extra,omitempty"`

	// Skipped is set by Latest, and not stored: the checkpoints newer than
	// this one that Latest passed over, newest first, with the reason.
	Skipped []Skipped `json:"-"`
}

// Validate reports every field of m outside its bounds (see Manifest).
// It does no I/O. Commit calls it; Latest treats a stored manifest that
// fails it as corrupt.
func (m *Manifest) Validate() error {
	if err := m.problems(); err != nil {
		return fmt.Errorf("ckpt: invalid manifest: %w", err)
	}
	return nil
}

// problems returns the problems Validate reports, joined, or nil.
func (m *Manifest) problems() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m.Format != ManifestFormat {
		add("format %q, want %q", m.Format, ManifestFormat)
	}
	if m.N < 0 {
		add("n %d, want >= 0", m.N)
	}
	if m.Epoch < 0 {
		add("epoch %d, want >= 0", m.Epoch)
	}
	if m.NextEpoch < 0 {
		add("next epoch %d, want >= 0", m.NextEpoch)
	}
	if m.Servers < 1 || m.Servers > maxServers {
		add("servers %d, want 1..%d", m.Servers, maxServers)
	}
	if len(m.Ranges) != 0 && len(m.Ranges) != m.Servers {
		add("%d ranges for %d servers, want none or one per server", len(m.Ranges), m.Servers)
	}
	for i, r := range m.Ranges {
		if r.Begin > r.Last {
			add("range %d: begin %d > last %d", i, r.Begin, r.Last)
		}
	}
	seen := make(map[string]bool, len(m.Files))
	for i, f := range m.Files {
		if !validFileName(f.Name) {
			add("file %d: name %q is not a base name, or starts with \".\" or \"_\"", i, f.Name)
		}
		if seen[f.Name] {
			add("file %d: %q listed twice", i, f.Name)
		}
		seen[f.Name] = true
		if f.Bytes < 0 {
			add("file %q: %d bytes", f.Name, f.Bytes)
		}
		if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != 32 || strings.ToLower(f.SHA256) != f.SHA256 {
			add("file %q: sha256 %q is not 64 lowercase hex digits", f.Name, f.SHA256)
		}
	}
	if m.Servers >= 1 && m.Servers <= maxServers {
		// Every table whose files are listed must have one per server; a
		// checkpoint of no table must list the files of one (unnamed).
		// The files missing are counted from those listed, and only the
		// first few looked for: a manifest may claim many servers and
		// list files of many tables.
		listed := map[string]int{} // by table, its files of servers 0..Servers-1
		for name := range seen {
			if t, r, ok := ParseTableFileName(name); ok {
				n := listed[t]
				if r < m.Servers {
					n++
				}
				listed[t] = n
			}
		}
		if len(listed) == 0 {
			listed[""] = 0
		}
		tables := slices.Sorted(maps.Keys(listed))
		missing := 0
		for _, t := range tables {
			missing += m.Servers - listed[t]
		}
		named := 0
		for _, t := range tables {
			for r, absent := 0, m.Servers-listed[t]; r < m.Servers && absent > 0 && named < 3; r++ {
				if name := TableFileName(t, r); !seen[name] {
					add("file %s of server %d not listed", name, r)
					named++
					absent--
				}
			}
		}
		if missing > 3 {
			add("and %d more server files", missing-3)
		}
	}
	return errors.Join(errs...)
}

// validFileName reports whether s may name a file in a checkpoint
// directory: a base name that is not a temporary name (".") nor reserved
// ("_", the manifest).
func validFileName(s string) bool {
	return s != "" && len(s) <= 255 && !strings.ContainsAny(s, "/\\\x00") &&
		s[0] != '.' && s[0] != '_'
}

// Commit commits checkpoint m.N under the checkpoint directory dir by
// writing its manifest, "<dir>/<m.N>/_manifest.json", under a temporary
// name that is then renamed: the checkpoint is committed exactly when the
// rename succeeds. Before that it validates m and checks that every file m
// lists exists in the checkpoint's directory with the listed size; a file
// that does not is an error wrapping fs.ErrNotExist (missing) or ErrCorrupt
// (wrong size or a directory), and nothing is written. Commit refuses, with
// an error wrapping fs.ErrExist, a checkpoint that is already committed.
//
// Commit does not read the files' contents: their SHA-256 values come from
// WriteServerFile, and Latest checks them.
func Commit(ctx context.Context, fsys dfs.FileSystem, dir string, m Manifest) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("ckpt: commit checkpoint %d: %w", m.N, err)
	}
	cdir := Path(dir, m.N)
	for _, f := range m.Files {
		name := path.Join(cdir, f.Name)
		fi, err := fsys.Stat(ctx, name)
		if err != nil {
			return fmt.Errorf("ckpt: commit checkpoint %d: %w", m.N, err)
		}
		switch {
		case fi.IsDir():
			return fmt.Errorf("ckpt: commit checkpoint %d: %w", m.N, corrupt(fsys.URI(name), -1, "a directory, not a file"))
		case fi.Size() != f.Bytes:
			return fmt.Errorf("ckpt: commit checkpoint %d: %w", m.N, corrupt(fsys.URI(name), -1, "%d bytes, the manifest lists %d", fi.Size(), f.Bytes))
		}
	}
	mname := path.Join(cdir, ManifestName)
	if _, err := fsys.Stat(ctx, mname); err == nil {
		return fmt.Errorf("ckpt: commit checkpoint %d: %s: %w", m.N, fsys.URI(mname), fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ckpt: commit checkpoint %d: %w", m.N, err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("ckpt: commit checkpoint %d: %w", m.N, err)
	}
	data = append(data, '\n')
	if err := dfs.WriteFile(ctx, fsys, mname, data); err != nil {
		return fmt.Errorf("ckpt: commit checkpoint %d: %w", m.N, err)
	}
	return nil
}

// readManifest reads and validates the manifest of checkpoint n. A missing
// manifest is an error wrapping fs.ErrNotExist; one that does not parse or
// validate, or names another checkpoint, wraps ErrCorrupt; one of an
// unknown format wraps errors.ErrUnsupported.
func readManifest(ctx context.Context, fsys dfs.FileSystem, dir string, n int) (Manifest, error) {
	name := path.Join(Path(dir, n), ManifestName)
	uri := fsys.URI(name)
	f, err := fsys.Open(ctx, name)
	if err != nil {
		return Manifest{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	if err != nil {
		return Manifest{}, err
	}
	if len(data) > maxManifestBytes {
		return Manifest{}, corrupt(uri, -1, "manifest larger than %d bytes", maxManifestBytes)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, corrupt(uri, -1, "manifest does not parse: %v", err)
	}
	if dec.More() {
		return Manifest{}, corrupt(uri, dec.InputOffset(), "data after the manifest")
	}
	if m.Format != ManifestFormat && strings.HasPrefix(m.Format, "spindle-checkpoint/") {
		return Manifest{}, fmt.Errorf("ckpt: %s: manifest format %q, this reader knows %q: %w", uri, m.Format, ManifestFormat, errors.ErrUnsupported)
	}
	if err := m.problems(); err != nil {
		return Manifest{}, corrupt(uri, -1, "invalid manifest: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if m.N != n {
		return Manifest{}, corrupt(uri, -1, "manifest of checkpoint %d in the directory of checkpoint %d", m.N, n)
	}
	return m, nil
}

// listCheckpoints returns the numbers of the checkpoint directories in dir
// (directories whose names are canonical non-negative decimal numbers),
// newest first. Other entries are ignored.
func listCheckpoints(ctx context.Context, fsys dfs.FileSystem, dir string) ([]int, error) {
	infos, err := fsys.ReadDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	var ns []int
	for _, fi := range infos {
		n, err := strconv.Atoi(fi.Name())
		if err != nil || n < 0 || strconv.Itoa(n) != fi.Name() || !fi.IsDir() {
			continue
		}
		ns = append(ns, n)
	}
	slices.SortFunc(ns, func(a, b int) int { return b - a })
	return ns, nil
}

// Latest returns the manifest of the newest usable checkpoint under the
// checkpoint directory dir. It looks at the numbered directories "<dir>/<n>"
// newest first, ignoring every other entry, and passes over a checkpoint
// that is not committed (no manifest), whose manifest does not parse or
// validate, or — with verify — one of whose listed files is missing or
// differs in size or SHA-256 from the manifest (read in full, a few files
// at a time). The returned Manifest's Skipped lists the checkpoints passed
// over and why, for the caller to report.
//
// When no checkpoint is usable, including when dir is missing or empty,
// the error wraps ErrNoCheckpoint and joins the Skipped reasons. Any other
// failure — listing dir, reading a manifest or a file — is returned as it
// is and never taken for a missing checkpoint: a job that cannot read its
// checkpoints must not start again from scratch, or resume from an older
// one, because of a transient error.
//
// Without verify only the manifests are read; ReadServerFile still
// detects a damaged file, but by then other servers may have loaded
// theirs, so a job that resumes should choose with verify.
func Latest(ctx context.Context, fsys dfs.FileSystem, dir string, verify bool) (Manifest, error) {
	ns, err := listCheckpoints(ctx, fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, fmt.Errorf("%w in %s: %w", ErrNoCheckpoint, fsys.URI(dir), err)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("ckpt: latest: %w", err)
	}
	var skipped []Skipped
	for _, n := range ns {
		m, err := readManifest(ctx, fsys, dir, n)
		if err == nil && verify {
			err = verifyFiles(ctx, fsys, Path(dir, n), m.Files)
		}
		var skip error
		switch {
		case err == nil:
			m.Skipped = skipped
			return m, nil
		case errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrCorrupt):
			skip = fmt.Errorf("not committed (no %s): %w", ManifestName, fs.ErrNotExist)
		case errors.Is(err, ErrCorrupt), errors.Is(err, errors.ErrUnsupported):
			skip = err
		default:
			return Manifest{}, fmt.Errorf("ckpt: latest: checkpoint %d: %w", n, err)
		}
		skipped = append(skipped, Skipped{N: n, Err: skip})
	}
	errs := make([]error, len(skipped))
	for i, s := range skipped {
		errs[i] = s
	}
	if len(errs) == 0 {
		return Manifest{}, fmt.Errorf("%w in %s: it holds no checkpoint", ErrNoCheckpoint, fsys.URI(dir))
	}
	return Manifest{}, fmt.Errorf("%w in %s:\n%w", ErrNoCheckpoint, fsys.URI(dir), errors.Join(errs...))
}

// verifyFiles checks the size and SHA-256 of the files of checkpoint
// directory cdir, verifyParallelism at a time. A file that is missing or
// does not match is an error wrapping ErrCorrupt; an I/O error is returned
// as it is. It returns the error of the first file, in manifest order,
// that failed.
func verifyFiles(ctx context.Context, fsys dfs.FileSystem, cdir string, files []FileEntry) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(files))
	sem := make(chan struct{}, verifyParallelism)
	var wg sync.WaitGroup
	for i, f := range files {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = verifyFile(ctx, fsys, path.Join(cdir, f.Name), f)
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	// A file that failed may have cancelled the others: report it, not
	// their cancellation.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// verifyFile checks the size and SHA-256 of one file against its entry.
func verifyFile(ctx context.Context, fsys dfs.FileSystem, name string, want FileEntry) error {
	uri := fsys.URI(name)
	fi, err := fsys.Stat(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return corrupt(uri, -1, "missing")
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return corrupt(uri, -1, "a directory, not a file")
	}
	if fi.Size() != want.Bytes {
		return corrupt(uri, -1, "%d bytes, the manifest lists %d", fi.Size(), want.Bytes)
	}
	n, sum, err := sha256Of(ctx, fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return corrupt(uri, -1, "missing")
	}
	if err != nil {
		return err
	}
	if n != want.Bytes {
		return corrupt(uri, -1, "read %d bytes, the manifest lists %d", n, want.Bytes)
	}
	if sum != want.SHA256 {
		return corrupt(uri, -1, "checksum mismatch: sha256 %s, the manifest lists %s", sum, want.SHA256)
	}
	return nil
}

// Prune removes old checkpoints under the checkpoint directory dir and
// returns the numbers of those it removed, ascending. It keeps the newest
// keep (>= 1) committed checkpoints (those whose manifest exists and
// parses), and removes the older committed ones and every uncommitted
// directory older than the newest committed checkpoint. It never touches
// the newest committed checkpoint or anything newer, which may be being
// written, nor entries that are not numbered directories; with no
// committed checkpoint it removes nothing.
//
// A checkpoint is uncommitted (its manifest removed) before the rest of it
// is removed, so a Prune that is interrupted never leaves a committed
// checkpoint with missing files. Prune carries on past a failure to remove
// one checkpoint and returns the failures joined.
//
// Keep at least 2 when a job must survive a damaged newest checkpoint:
// Prune counts committed checkpoints without verifying their files.
func Prune(ctx context.Context, fsys dfs.FileSystem, dir string, keep int) ([]int, error) {
	if keep < 1 {
		return nil, fmt.Errorf("ckpt: prune %s: keep %d, want >= 1", fsys.URI(dir), keep)
	}
	ns, err := listCheckpoints(ctx, fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ckpt: prune: %w", err)
	}
	var (
		committed int // committed checkpoints seen so far, newest first
		remove    []int
	)
	for _, n := range ns {
		_, err := readManifest(ctx, fsys, dir, n)
		switch {
		case err == nil:
			committed++
			if committed > keep {
				remove = append(remove, n)
			}
		case errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrCorrupt),
			errors.Is(err, ErrCorrupt), errors.Is(err, errors.ErrUnsupported):
			// Not committed: removable only below a committed checkpoint.
			if committed > 0 {
				remove = append(remove, n)
			}
		default:
			return nil, fmt.Errorf("ckpt: prune: checkpoint %d: %w", n, err)
		}
	}
	var (
		removed []int
		errs    []error
	)
	for _, n := range remove {
		if err := removeCheckpoint(ctx, fsys, dir, n); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, n)
	}
	slices.Sort(removed)
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("ckpt: prune: %w", err)
	}
	return removed, nil
}

// removeCheckpoint removes the manifest of checkpoint n, then its
// directory.
func removeCheckpoint(ctx context.Context, fsys dfs.FileSystem, dir string, n int) error {
	cdir := Path(dir, n)
	if err := fsys.Remove(ctx, path.Join(cdir, ManifestName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint %d: %w", n, err)
	}
	if err := fsys.RemoveAll(ctx, cdir); err != nil {
		return fmt.Errorf("checkpoint %d: %w", n, err)
	}
	return nil
}
