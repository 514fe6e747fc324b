package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/examples/internal/subcmd/subcmdtest"
)

// TestTrainFlags: bad flags are reported together, each by its name, and
// the program exits 2 for them without starting a node.
func TestTrainFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		errs []string // nil: valid
	}{
		{"defaults", nil, nil},
		{"zero", []string{"--mode", "zero", "--batch", "16384"}, nil},
		{"every problem at once", []string{"--mode", "sharded", "--batch", "0", "--epochs", "0", "--classes", "1", "--lr", "-1", "--step-timeout", "0s"},
			[]string{`mode "sharded"`, "batch 0", "--epochs 0", "--classes 1", "lr, eps > 0", "--step-timeout 0s"}},
		{"batch too large", []string{"--batch", "16385"}, []string{"batch 16385: want 1..16384"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseTrainFlags(tt.args)
			if tt.errs == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, want := range tt.errs {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want one saying %q", err, want)
				}
			}
		})
	}
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--batch", "0"}, &stderr, &stderr, func(string) (string, bool) { return "", false }, nil)
	if code != 1 || !strings.Contains(stderr.String(), "batch 0") {
		t.Errorf("exit %d, stderr %q; want 1 and the flag named", code, stderr.String())
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"--no-such-flag"}, &stderr, &stderr, func(string) (string, bool) { return "", false }, nil); code != 2 {
		t.Errorf("an unknown flag: exit %d, want 2", code)
	}
}

// TestHelp: -h says how ps-dense and its subcommands are called, then
// the flags.
func TestHelp(t *testing.T) { subcmdtest.Help(t, psDense, "ps-dense", "gen", "eval") }
