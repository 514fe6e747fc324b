package ckpt

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/io/dfs"
)

// writeCheckpoint writes checkpoint n of servers servers under dir, each
// with a few float32 records, and commits it when commit is set. It
// returns the manifest.
func writeCheckpoint(t *testing.T, dir string, n, servers int, commit bool) Manifest {
	t.Helper()
	ctx := t.Context()
	m := Manifest{
		Format: ManifestFormat, N: n, Epoch: n, NextEpoch: n, Servers: servers,
		Partitioner: "range", MaxKey: math.MaxUint64 - 1,
		Created: time.Date(2026, 11, 21, 10, 0, n, 0, time.UTC), Job: "application_1_0001",
		Extra: map[string]string{"updater": "adagrad"},
	}
	for r := range servers {
		recs := genRecords[float32](uint64(n*100+r), 10+r, 2, 1)
		fe, err := WriteServerFile(ctx, dfs.Local{}, filepath.Join(Path(dir, n), ServerFileName(r)), Header{Dim: 2, StateWidth: 1, Records: int64(len(recs))}, seq(recs))
		if err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, fe)
		m.Ranges = append(m.Ranges, Range{Begin: uint64(r) << 60, Last: uint64(r)<<60 + 1<<60 - 1})
	}
	if commit {
		if err := Commit(ctx, dfs.Local{}, dir, m); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// entries lists the names in dir, sorted.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	m := writeCheckpoint(t, dir, 4, 3, true)
	if got, want := entries(t, Path(dir, 4)), []string{ManifestName, "server-0", "server-1", "server-2"}; !slices.Equal(got, want) {
		t.Errorf("checkpoint directory holds %q, want %q", got, want)
	}
	data, err := os.ReadFile(filepath.Join(Path(dir, 4), ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"format": "spindle-checkpoint/1"`, `"max_key": "18446744073709551614"`, `"next_epoch": 4`, `"last": "1152921504606846975"`, `"sha256": "`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("manifest lacks %s:\n%s", want, data)
		}
	}
	got, err := Latest(ctx, dfs.Local{}, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, got, m) || got.Skipped != nil {
		t.Errorf("Latest = %+v, want %+v", got, m)
	}
	err = Commit(ctx, dfs.Local{}, dir, m)
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("second Commit = %v, want fs.ErrExist", err)
	}
}

// jsonEqual reports whether a and b encode to the same JSON.
func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

func TestCommitRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		change  func(dir string, m *Manifest)
		want    error
		wantMsg string
	}{
		{
			name:    "missing file",
			change:  func(dir string, m *Manifest) { os.Remove(filepath.Join(Path(dir, m.N), "server-1")) },
			want:    fs.ErrNotExist,
			wantMsg: "server-1",
		},
		{
			name:    "wrong size",
			change:  func(_ string, m *Manifest) { m.Files[1].Bytes++ },
			want:    ErrCorrupt,
			wantMsg: "server-1: corrupt: ",
		},
		{
			name: "listed file is a directory",
			change: func(dir string, m *Manifest) {
				os.Mkdir(filepath.Join(Path(dir, m.N), "extra"), 0o755)
				m.Files = append(m.Files, FileEntry{Name: "extra", SHA256: m.Files[0].SHA256})
			},
			want:    ErrCorrupt,
			wantMsg: "a directory",
		},
		{
			name:    "server file not listed",
			change:  func(_ string, m *Manifest) { m.Files = m.Files[:1] },
			wantMsg: "file server-1 of server 1 not listed",
		},
		{
			name:    "format",
			change:  func(_ string, m *Manifest) { m.Format = "" },
			wantMsg: `format ""`,
		},
		{
			name: "several problems at once",
			change: func(_ string, m *Manifest) {
				m.N, m.Epoch, m.NextEpoch, m.Servers = -1, -2, -3, 0
			},
			wantMsg: "n -1, want >= 0\nepoch -2, want >= 0\nnext epoch -3, want >= 0\nservers 0, want 1..1048576",
		},
		{
			name:    "ranges",
			change:  func(_ string, m *Manifest) { m.Ranges = m.Ranges[:1] },
			wantMsg: "1 ranges for 2 servers",
		},
		{
			name:    "inverted range",
			change:  func(_ string, m *Manifest) { m.Ranges[1] = Range{Begin: 9, Last: 8} },
			wantMsg: "range 1: begin 9 > last 8",
		},
		{
			name:    "path in a file name",
			change:  func(_ string, m *Manifest) { m.Files[1].Name = "../server-1" },
			wantMsg: "not a base name",
		},
		{
			name:    "temporary file name",
			change:  func(_ string, m *Manifest) { m.Files[1].Name = ".server-1.tmp" },
			wantMsg: "not a base name",
		},
		{
			name:    "duplicate file",
			change:  func(_ string, m *Manifest) { m.Files = append(m.Files, m.Files[0]) },
			wantMsg: `"server-0" listed twice`,
		},
		{
			name:    "bad checksum",
			change:  func(_ string, m *Manifest) { m.Files[0].SHA256 = strings.ToUpper(m.Files[0].SHA256) },
			wantMsg: "not 64 lowercase hex digits",
		},
		{
			name:    "negative size",
			change:  func(_ string, m *Manifest) { m.Files[0].Bytes = -1 },
			wantMsg: "-1 bytes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			m := writeCheckpoint(t, dir, 1, 2, false)
			tt.change(dir, &m)
			err := Commit(t.Context(), dfs.Local{}, dir, m)
			if err == nil {
				t.Fatal("Commit succeeded")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Commit = %v, want an error wrapping %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) || !strings.HasPrefix(err.Error(), "ckpt: ") {
				t.Errorf("Commit = %q, want a ckpt error containing %q", err, tt.wantMsg)
			}
			for _, name := range entries(t, Path(dir, 1)) {
				if strings.Contains(name, "manifest") {
					t.Errorf("failed Commit left %s", name)
				}
			}
		})
	}
}

func TestCommitWriteFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fsys dfs.FileSystem
	}{
		{"write", failFS{failAfter: 10}},
		{"rename", failFS{failAfter: -1, failRename: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			m := writeCheckpoint(t, dir, 1, 2, false)
			if err := Commit(t.Context(), tt.fsys, dir, m); !errors.Is(err, errInjected) {
				t.Errorf("Commit = %v, want the injected error", err)
			}
			if got, want := entries(t, Path(dir, 1)), []string{"server-0", "server-1"}; !slices.Equal(got, want) {
				t.Errorf("checkpoint directory holds %q, want %q", got, want)
			}
		})
	}
}

// flipByte flips one bit of the byte at off in the file name.
func flipByte(t *testing.T, name string, off int64) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x10
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLatest(t *testing.T) {
	t.Parallel()
	type skip struct {
		n       int
		is      error
		contain string
	}
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir string)
		verify   bool
		want     int // -1: ErrNoCheckpoint
		skipped  []skip
		errParts []string // for ErrNoCheckpoint
	}{
		{
			name:  "empty directory",
			setup: func(*testing.T, string) {},
			want:  -1,
		},
		{
			name:  "missing directory",
			setup: func(t *testing.T, dir string) { os.Remove(dir) },
			want:  -1,
		},
		{
			name: "newest committed, ignoring other entries",
			setup: func(t *testing.T, dir string) {
				writeCheckpoint(t, dir, 1, 2, true)
				writeCheckpoint(t, dir, 2, 2, true)
				for _, d := range []string{"tmp", "007", "-1", "+9", "9x"} {
					os.Mkdir(filepath.Join(dir, d), 0o755)
				}
				os.WriteFile(filepath.Join(dir, "12"), []byte("a file"), 0o644)
			},
			verify: true,
			want:   2,
		},
		{
			name: "numeric, not lexical, order",
			setup: func(t *testing.T, dir string) {
				writeCheckpoint(t, dir, 9, 1, true)
				writeCheckpoint(t, dir, 10, 1, true)
			},
			verify: true,
			want:   10,
		},
		{
			name: "uncommitted newer directory",
			setup: func(t *testing.T, dir string) {
				writeCheckpoint(t, dir, 1, 2, true)
				writeCheckpoint(t, dir, 2, 2, true)
				writeCheckpoint(t, dir, 3, 2, false)
			},
			verify:  true,
			want:    2,
			skipped: []skip{{3, fs.ErrNotExist, "checkpoint 3 skipped: not committed (no _manifest.json)"}},
		},
		{
			name: "corrupt file in the newest",
			setup: func(t *testing.T, dir string) {
				writeCheckpoint(t, dir, 1, 2, true)
				writeCheckpoint(t, dir, 2, 2, true)
				flipByte(t, filepath.Join(Path(dir, 2), "server-0"), 40)
			},
			verify:  true,
			want:    1,
			skipped: []skip{{2, ErrCorrupt, "/2/server-0: corrupt: checksum mismatch"}},
		},
		{
			name: "corrupt file in the newest, not verified",
			setup: func(t *testing.T, dir string) {
				writeCheckpoint(t, dir, 1, 2, true)
				writeCheckpoint(t, dir, 2, 2, true)
				flipByte(t, filepath.Join(Path(dir, 2), "server-0"), 40)
			},
			want: 2,
		},
		{
			name: "truncated file",
			setup: func(t *testing.T, dir string) {
				writeCheckpoint(t, dir, 1, 2, true)
				writeCheckpoint(t, dir, 2, 2, true)
				os.Truncate(filepath.Join(Path(dir, 2), "server-1"), 50)
			},
			verify:  true,
			want:    1,
			skipped: []skip{{2, ErrCorrupt, "/2/server-1: corrupt: 50 bytes, the manifest lists"}},
		},
		{
			name: "missing file",
			setup: func(t *testing.T, dir string) {
				writeCheckpoint(t, dir, 1, 2, true)
				writeCheckpoint(t, dir, 2, 2, true)
				os.Remove(filepath.Join(Path(dir, 2), "server-1"))
			},
			verify:  true,
			want:    1,
			skipped: []skip{{2, ErrCorrupt, "/2/server-1: corrupt: missing"}},
		},
		{
			name: "garbled manifest",
			setup: func(t *testing.T, dir string) {
				writeCheckpoint(t, dir, 1, 2, true)
				writeCheckpoint(t, dir, 2, 2, true)
				os.WriteFile(filepath.Join(Path(dir, 2), ManifestName), []byte(`{"format": "spindle-checkpoint/1", "n": 2,`), 0o644)
			},
			want:    1,
			skipped: []skip{{2, ErrCorrupt, "manifest does not parse"}},
		},
		{
			name: "manifest of another checkpoint",
			setup: func(t *testing.T, dir string) {
				writeCheckpoint(t, dir, 1, 2, true)
				os.MkdirAll(Path(dir, 5), 0o755)
				data, _ := os.ReadFile(filepath.Join(Path(dir, 1), ManifestName))
				os.WriteFile(filepath.Join(Path(dir, 5), ManifestName), data, 0o644)
			},
			want:    1,
			skipped: []skip{{5, ErrCorrupt, "manifest of checkpoint 1 in the directory of checkpoint 5"}},
		},
		{
			name: "invalid manifest",
			setup: func(t *testing.T, dir string) {
				writeCheckpoint(t, dir, 1, 2, true)
				writeCheckpoint(t, dir, 2, 2, true)
				os.WriteFile(filepath.Join(Path(dir, 2), ManifestName), []byte(`{"format": "spindle-checkpoint/1", "n": 2, "servers": 2, "files": []}`), 0o644)
			},
			want:    1,
			skipped: []skip{{2, ErrCorrupt, "file server-0 of server 0 not listed"}},
		},
		{
			name: "newer manifest format",
			setup: func(t *testing.T, dir string) {
				writeCheckpoint(t, dir, 1, 2, true)
				writeCheckpoint(t, dir, 2, 2, true)
				os.WriteFile(filepath.Join(Path(dir, 2), ManifestName), []byte(`{"format": "spindle-checkpoint/2", "n": 2}`), 0o644)
			},
			want:    1,
			skipped: []skip{{2, errors.ErrUnsupported, `manifest format "spindle-checkpoint/2"`}},
		},
		{
			name: "nothing usable",
			setup: func(t *testing.T, dir string) {
				writeCheckpoint(t, dir, 1, 1, true)
				writeCheckpoint(t, dir, 2, 1, false)
				flipByte(t, filepath.Join(Path(dir, 1), "server-0"), 33)
			},
			verify: true,
			want:   -1,
			errParts: []string{
				"checkpoint 2 skipped: not committed",
				"checkpoint 1 skipped: ckpt: ",
				"/1/server-0: corrupt: checksum mismatch",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "ckpt")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, dir)
			m, err := Latest(t.Context(), dfs.Local{}, dir, tt.verify)
			if tt.want < 0 {
				if !errors.Is(err, ErrNoCheckpoint) {
					t.Fatalf("Latest = %+v, %v; want ErrNoCheckpoint", m, err)
				}
				for _, p := range tt.errParts {
					if !strings.Contains(err.Error(), p) {
						t.Errorf("error %q lacks %q", err, p)
					}
				}
				if len(tt.errParts) > 0 {
					var s Skipped
					if !errors.As(err, &s) {
						t.Errorf("error %q holds no Skipped", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Latest: %v", err)
			}
			if m.N != tt.want {
				t.Errorf("Latest chose checkpoint %d, want %d", m.N, tt.want)
			}
			if len(m.Skipped) != len(tt.skipped) {
				t.Fatalf("Skipped = %v, want %d entries", m.Skipped, len(tt.skipped))
			}
			for i, s := range tt.skipped {
				got := m.Skipped[i]
				if got.N != s.n || !errors.Is(got, s.is) || !strings.Contains(got.Error(), s.contain) {
					t.Errorf("Skipped[%d] = %q (N %d), want checkpoint %d wrapping %v and containing %q", i, got, got.N, s.n, s.is, s.contain)
				}
				t.Log(got)
			}
		})
	}
}

// errFS is a local file system whose Open fails with EIO for names ending
// in failSuffix.
type errFS struct {
	dfs.Local
	failSuffix string
}

func (e errFS) Open(ctx context.Context, name string) (dfs.File, error) {
	if strings.HasSuffix(name, e.failSuffix) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EIO}
	}
	return e.Local.Open(ctx, name)
}

// TestLatestIOError checks that an I/O error is reported, not taken for a
// missing or damaged checkpoint.
func TestLatestIOError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		suffix string
		verify bool
	}{
		{"manifest", "/2/" + ManifestName, false},
		{"server file", "/2/server-1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeCheckpoint(t, dir, 1, 2, true)
			writeCheckpoint(t, dir, 2, 2, true)
			m, err := Latest(t.Context(), errFS{failSuffix: tt.suffix}, dir, tt.verify)
			if !errors.Is(err, syscall.EIO) || errors.Is(err, ErrNoCheckpoint) || errors.Is(err, ErrCorrupt) {
				t.Errorf("Latest = checkpoint %d, %v; want EIO only", m.N, err)
			}
		})
	}
	t.Run("context cancelled", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeCheckpoint(t, dir, 1, 2, true)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := Latest(ctx, dfs.Local{}, dir, true)
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("Latest = %v, want context.Canceled only", err)
		}
	})
}

func TestPrune(t *testing.T) {
	t.Parallel()
	// Layouts: c = committed, u = uncommitted (no manifest), g = garbled
	// manifest, by checkpoint number.
	tests := []struct {
		name    string
		layout  map[int]byte
		keep    int
		removed []int
		left    []string
	}{
		{
			name:    "keep 2",
			layout:  map[int]byte{1: 'c', 2: 'u', 3: 'c', 4: 'c', 5: 'c', 6: 'u', 7: 'g'},
			keep:    2,
			removed: []int{1, 2, 3},
			left:    []string{"4", "5", "6", "7", "junk"},
		},
		{
			name:    "keep 1",
			layout:  map[int]byte{1: 'c', 2: 'u', 3: 'c', 4: 'c', 5: 'c', 6: 'u', 7: 'g'},
			keep:    1,
			removed: []int{1, 2, 3, 4},
			left:    []string{"5", "6", "7", "junk"},
		},
		{
			name:    "keep more than there are",
			layout:  map[int]byte{0: 'u', 1: 'c', 2: 'g', 3: 'c', 4: 'u'},
			keep:    5,
			removed: []int{0, 2},
			left:    []string{"1", "3", "4", "junk"},
		},
		{
			name:   "nothing committed",
			layout: map[int]byte{1: 'u', 2: 'g', 3: 'u'},
			keep:   1,
			left:   []string{"1", "2", "3", "junk"},
		},
		{
			name:   "only the newest committed",
			layout: map[int]byte{8: 'c', 9: 'u', 10: 'u'},
			keep:   1,
			left:   []string{"10", "8", "9", "junk"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			dir := t.TempDir()
			for n, kind := range tt.layout {
				writeCheckpoint(t, dir, n, 1, kind == 'c')
				if kind == 'g' {
					os.WriteFile(filepath.Join(Path(dir, n), ManifestName), []byte("{"), 0o644)
				}
			}
			os.Mkdir(filepath.Join(dir, "junk"), 0o755)
			removed, err := Prune(ctx, dfs.Local{}, dir, tt.keep)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(removed, tt.removed) {
				t.Errorf("Prune removed %v, want %v", removed, tt.removed)
			}
			if got := entries(t, dir); !slices.Equal(got, tt.left) {
				t.Errorf("left %q, want %q", got, tt.left)
			}
			// Whatever is left that was committed is still loadable.
			if slices.Contains(slices.Collect(maps.Values(tt.layout)), 'c') {
				if _, err := Latest(ctx, dfs.Local{}, dir, true); err != nil {
					t.Errorf("Latest after Prune: %v", err)
				}
			}
		})
	}
	t.Run("keep 0", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeCheckpoint(t, dir, 1, 1, true)
		if _, err := Prune(t.Context(), dfs.Local{}, dir, 0); err == nil {
			t.Error("Prune with keep 0 succeeded")
		}
		if got := entries(t, dir); !slices.Equal(got, []string{"1"}) {
			t.Errorf("left %q", got)
		}
	})
	t.Run("missing directory", func(t *testing.T) {
		t.Parallel()
		removed, err := Prune(t.Context(), dfs.Local{}, filepath.Join(t.TempDir(), "nope"), 1)
		if err != nil || removed != nil {
			t.Errorf("Prune = %v, %v; want nothing", removed, err)
		}
	})
}

func TestPathNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, got, want string
	}{
		{"path", Path("/ckpt", 3), "/ckpt/3"},
		{"path with trailing slash", Path("/ckpt/", 12), "/ckpt/12"},
		{"server file", ServerFileName(7), "server-7"},
		{"temp name", dfs.TempName("/ckpt/3/server-7"), "/ckpt/3/.server-7.tmp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}
