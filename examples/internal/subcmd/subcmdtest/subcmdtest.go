// Package subcmdtest checks the help of an example program's binary.
package subcmdtest

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Help runs bin (program prog) with -h and --help, and each of subs with
// -h, and checks that each exits 0 and prints, on stderr, a heading that
// starts "Usage: PROG [SUB]" and then the flags; the training's heading
// names every subcommand in subs.
func Help(t *testing.T, bin, prog string, subs ...string) {
	t.Helper()
	cases := [][]string{{"-h"}, {"--help"}, {"train", "-h"}}
	for _, s := range subs {
		cases = append(cases, []string{s, "-h"})
	}
	for _, args := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		out := stderr.String()
		want := "Usage: " + prog + " [train] [flags]"
		if len(args) > 1 && args[0] != "train" {
			want = "Usage: " + prog + " " + args[0] + " "
		}
		if err != nil || stdout.Len() > 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, "\n\nFlags:\n  -") {
			t.Errorf("%s %s: %v; stdout %q; stderr:\n%s\nwant exit 0, nothing on stdout, %q first, then the flags", prog, strings.Join(args, " "), err, stdout.String(), out, want)
			continue
		}
		if args[0] != "train" && len(args) == 1 {
			for _, s := range subs {
				if !strings.Contains(out, "\n       "+prog+" "+s+" ") {
					t.Errorf("%s %s does not show how to call %q:\n%s", prog, args[0], s, out)
				}
			}
		}
	}
}
