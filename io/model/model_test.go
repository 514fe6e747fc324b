package model

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(dir, PartName(0)), []byte("1\t0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Commit(ctx, LocalFS{}, dir, 2, Manifest{Job: "j"})
	if err == nil || !strings.Contains(err.Error(), PartName(1)) {
		t.Fatalf("commit with part 1 missing: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, SuccessFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("_SUCCESS written for an incomplete model")
	}
	if err := os.WriteFile(filepath.Join(dir, PartName(1)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Commit(ctx, LocalFS{}, dir, 2, Manifest{Job: "j"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{SuccessFile, ManifestFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
