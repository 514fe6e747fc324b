package subcmd

import (
	"errors"
	"fmt"
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
