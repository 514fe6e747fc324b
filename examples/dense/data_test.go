package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/examples/dense/dense"
	"github.com/spindle-ps/spindle/feed"
)

// TestMalformedLine: a line that does not parse is reported with the
// file, its line and its byte offset.
func TestMalformedLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.csv")
	if err := os.WriteFile(path, []byte("0,1.5,2\n\n1,0.5,1\n2,x,3\n0,1,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readLocal(context.Background(), path, 3)
	want := "file://" + path + ", line 4 (byte 17)"
	if !errors.Is(err, dense.ErrSyntax) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want a syntax error naming %q", err, want)
	}
	if got := feed.ExitStatus(err); got != conf.ExitBadInput {
		t.Errorf("a worker ending on it exits %d, want %d (not started again)", got, conf.ExitBadInput)
	}
}
