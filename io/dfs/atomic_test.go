package dfs

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteAtomic: a complete write replaces the file; a failed one —
// fill's error, a cancelled context, a panic in fill — leaves the old file
// and no temporary file behind.
func TestWriteAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	ctx := context.Background()
	if err := WriteFile(ctx, Local{}, name, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	cctx, cancel := context.WithCancel(ctx)
	tests := []struct {
		name string
		ctx  context.Context
		fill func(io.Writer) error
		want error
	}{
		{"fill fails", ctx, func(w io.Writer) error { _, _ = w.Write([]byte("par")); return boom }, boom},
		{"context cancelled", cctx, func(w io.Writer) error { _, _ = w.Write([]byte("par")); cancel(); return nil }, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := WriteAtomic(tt.ctx, Local{}, name, tt.fill); !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			checkOnly(t, dir, "old")
		})
	}
	t.Run("fill panics", func(t *testing.T) {
		func() {
			defer func() { _ = recover() }()
			_ = WriteAtomic(ctx, Local{}, name, func(io.Writer) error { panic("fill") })
		}()
		checkOnly(t, dir, "old")
	})
	if err := WriteFile(ctx, Local{}, name, []byte("new")); err != nil {
		t.Fatal(err)
	}
	checkOnly(t, dir, "new")
	if got := TempName("/a/b/part-00001"); got != "/a/b/.part-00001.tmp" {
		t.Errorf("TempName = %q", got)
	}
}

// checkOnly checks that dir holds only f, with content want.
func checkOnly(t *testing.T, dir, want string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "f" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only f", names)
	}
	got, err := os.ReadFile(filepath.Join(dir, "f"))
	if err != nil || string(got) != want {
		t.Errorf("f holds %q (%v), want %q", got, err, want)
	}
}

func TestRemoveEmptyDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty, full, gone := filepath.Join(dir, "empty"), filepath.Join(dir, "full"), filepath.Join(dir, "gone")
	for _, d := range []string{empty, full} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(full, "part-00000"), []byte("w"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		removed bool
	}{{empty, true}, {full, false}, {gone, false}} {
		removed, err := RemoveEmptyDir(t.Context(), Local{}, tc.name)
		_, serr := os.Stat(tc.name)
		if err != nil || removed != tc.removed || errors.Is(serr, os.ErrNotExist) != (tc.removed || tc.name == gone) {
			t.Errorf("RemoveEmptyDir(%s) = %v, %v (then Stat: %v); want %v", filepath.Base(tc.name), removed, err, serr, tc.removed)
		}
	}
}
