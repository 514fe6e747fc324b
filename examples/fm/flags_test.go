package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/examples/internal/subcmd/subcmdtest"
)

// TestTrainFlags: every bad flag is reported at once, naming the flag.
func TestTrainFlags(t *testing.T) {
	f, err := parseTrainFlags(nil)
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if f.model.Dim != 8 || !f.model.Bias || f.wUpdater != "ftrl" || f.vUpdater != "adagrad" || f.Async || f.Bounded() || !f.Prefetch {
		t.Errorf("defaults %+v", f)
	}
	_, err = parseTrainFlags([]string{"--epochs", "0", "--batch", "0", "--dim", "0", "--w-updater", "adam", "--v-updater", "ftrl",
		"--partitioner", "modulo", "--request-timeout", "0s", "--model-format", "csv", "--v-lr", "-1", "--max-bad-records", "-1", "--cache-mb", "2000000",
		"--staleness", "-2", "--significance", "-1"})
	if err == nil {
		t.Fatal("bad flags accepted")
	}
	for _, want := range []string{"--epochs 0", "--batch 0", "--dim 0", `--w-updater "adam"`, `--v-updater "ftrl"`,
		`--partitioner "modulo"`, "--request-timeout 0s", `--model-format "csv"`, "--max-bad-records -1", "--cache-mb 2000000: want -1 (a quarter of the worker's memory) or 0 to 1048576", "--staleness -2", "--significance -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := parseTrainFlags([]string{"--v-lr", "-1"}); err == nil || !strings.Contains(err.Error(), "--v-updater adagrad") {
		t.Errorf("negative embedding learning rate: %v", err)
	}
	if _, err := parseTrainFlags([]string{"--init-scale", "0"}); err == nil || !strings.Contains(err.Error(), "--init-scale 0") {
		t.Errorf("init scale 0: %v", err)
	}
}

// TestUsage: usage errors exit 2 (the flag package prints them), other
// failures 1, with the command named.
func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		says string
	}{
		{"unknown flag", []string{"--no-such-flag"}, 2, ""},
		{"eval without model", []string{"eval", "--test", "x"}, 2, ""},
		{"gen without out", []string{"gen"}, 2, ""},
		{"train without tracker", []string{"--epochs", "0"}, 1, "ps-fm train: --epochs 0"},
		{"eval of a missing model", []string{"eval", "--model", "/nonexistent/model", "--test", "x"}, 1, "ps-fm eval:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tt.args, &out, &errb, func(string) (string, bool) { return "", false }, nil)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.says) {
				t.Errorf("stderr %q does not say %q", errb.String(), tt.says)
			}
		})
	}
}

// TestHelp: -h says how ps-fm and its subcommands are called, then the
// flags.
func TestHelp(t *testing.T) {
	setup(t)
	subcmdtest.Help(t, psFM, "ps-fm", "gen", "eval")
}
