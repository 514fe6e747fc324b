package subcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
)

func TestRun(t *testing.T) {
	t.Parallel()
	var ran string
	var got []string
	cmd := func(name string, err error) func([]string) error {
		return func(args []string) error { ran, got = name, args; return err }
	}
	cmds := map[string]func([]string) error{
		"train": cmd("train", nil),
		"gen":   cmd("gen", ErrUsage),
		"eval":  cmd("eval", errors.New("no model")),
		"die":   cmd("die", fmt.Errorf("epoch 1: %w", psnode.ErrSyncWorkerDied)),
	}
	for _, tc := range []struct {
		args    []string
		ran     string
		rest    []string
		status  int
		printed string
	}{
		{nil, "train", nil, 0, ""},
		{[]string{"--epochs", "2"}, "train", []string{"--epochs", "2"}, 0, ""},
		{[]string{"train", "--epochs", "2"}, "train", []string{"--epochs", "2"}, 0, ""},
		{[]string{"gen", "--bad"}, "gen", []string{"--bad"}, 2, ""},
		{[]string{"eval"}, "eval", []string{}, 1, "ps-x eval: no model\n"},
		{[]string{"die", "x"}, "die", []string{"x"}, conf.ExitRestartJob, "ps-x die: epoch 1: "},
	} {
		ran, got = "", nil
		var stderr strings.Builder
		status := Run("ps-x", tc.args, &stderr, cmds)
		if ran != tc.ran || fmt.Sprint(got) != fmt.Sprint(tc.rest) || status != tc.status || !strings.HasPrefix(stderr.String(), tc.printed) || (tc.printed == "") != (stderr.Len() == 0) {
			t.Errorf("Run(%q): ran %s %q, status %d, printed %q; want %s %q, %d, %q", tc.args, ran, got, status, stderr.String(), tc.ran, tc.rest, tc.status, tc.printed)
		}
	}
	delete(cmds, "train")
	var stderr strings.Builder
	if status := Run("ps-x", nil, &stderr, cmds); status != 2 || !strings.Contains(stderr.String(), "no train subcommand") {
		t.Errorf("without train: status %d, printed %q", status, stderr.String())
	}
}

// TestParse checks what a user sees of a bad flag: one line naming it,
// which a job's last lines of a failed task keep, and the whole usage
// only when asked for.
func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		err    error
		status int
		want   []string // lines printed, each a prefix
	}{
		{[]string{"--epochs", "2"}, nil, 0, nil},
		{[]string{"--bogus"}, ErrUsage, 2, []string{"ps-x train: flag provided but not defined: -bogus ('ps-x train -h' lists the flags)"}},
		{[]string{"--epochs", "x"}, ErrUsage, 2, []string{`ps-x train: invalid value "x" for flag -epochs: parse error`}},
		{[]string{"-h"}, flag.ErrHelp, 0, []string{"Usage of ps-x train:", "  -epochs int", "    \tpasses"}},
	} {
		var out strings.Builder
		fl := flag.NewFlagSet("ps-x train", flag.ContinueOnError)
		fl.SetOutput(&out)
		fl.Int("epochs", 3, "passes over the input")
		err := Parse(fl, tc.args)
		status := Run("ps-x", nil, io.Discard, map[string]func([]string) error{"train": func([]string) error { return err }})
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if out.Len() == 0 {
			lines = nil
		}
		ok := errors.Is(err, tc.err) && (err == nil) == (tc.err == nil) && status == tc.status && len(lines) == len(tc.want)
		for i := 0; ok && i < len(lines); i++ {
			ok = strings.HasPrefix(lines[i], tc.want[i])
		}
		if !ok {
			t.Errorf("Parse(%q): %v, status %d, printed %q; want %v, %d, %q", tc.args, err, status, out.String(), tc.err, tc.status, tc.want)
		}
	}
}

// TestUsage: -h prints the heading, then the flags.
func TestUsage(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	fl := flag.NewFlagSet("ps-x", flag.ContinueOnError)
	fl.SetOutput(&out)
	fl.Int("epochs", 3, "passes over the input")
	Usage(fl, "\nUsage: ps-x [flags]\n\nps-x trains.\n")
	if err := Parse(fl, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse(-h): %v", err)
	}
	want := "Usage: ps-x [flags]\n\nps-x trains.\n\nFlags:\n  -epochs int\n    \tpasses over the input (default 3)\n"
	if out.String() != want {
		t.Errorf("-h printed\n%q\nwant\n%q", out.String(), want)
	}
}
