// Package subcmd dispatches the subcommands of the example programs
// (ps-lr, ps-fm): "PROG [gen|eval|train] FLAGS…", training when no
// subcommand is named, and turns the outcome into the exit status.
package subcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spindle-ps/spindle/feed"
)

// ErrUsage reports a usage error that the flag package already printed;
// the program exits with status 2.
var ErrUsage = errors.New("usage")

// Parse parses args into fl. With -h or --help it prints fl's usage and
// returns flag.ErrHelp, for which Run exits 0. On any other error it
// prints one line, the error and how to list the flags, and returns
// ErrUsage: not the whole usage, whose last lines would hide the error
// where a job shows a failed task's last lines.
func Parse(fl *flag.FlagSet, args []string) error {
	out := fl.Output()
	fl.SetOutput(io.Discard)
	err := fl.Parse(args)
	fl.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fl.Usage()
		return flag.ErrHelp
	}
	fmt.Fprintf(out, "%s: %v ('%s -h' lists the flags)\n", fl.Name(), err, fl.Name())
	return ErrUsage
}

// Usage makes fl's usage, which -h and --help print, start with heading
// (how the command is called and what it does) before the flags, rather
// than the flag package's bare "Usage of NAME:".
func Usage(fl *flag.FlagSet, heading string) {
	fl.Usage = func() {
		fmt.Fprintf(fl.Output(), "%s\n\nFlags:\n", strings.TrimSpace(heading))
		fl.PrintDefaults()
	}
}

// Default is the subcommand that runs when args name none.
const Default = "train"

// Run runs the subcommand of prog that args[0] names among cmds (Default
// when it names none; args then all go to Default) with the remaining
// arguments, prints its error as "PROG CMD: ERR" on stderr and returns
// the exit status: 0 for flag.ErrHelp, 2 for ErrUsage, else
// feed.ExitStatus (75 when a synchronous worker died, for the launcher
// to restart the job).
func Run(prog string, args []string, stderr io.Writer, cmds map[string]func(args []string) error) int {
	cmd := Default
	if len(args) > 0 {
		if _, ok := cmds[args[0]]; ok {
			cmd, args = args[0], args[1:]
		}
	}
	f, ok := cmds[cmd]
	if !ok {
		fmt.Fprintf(stderr, "%s: no %s subcommand\n", prog, cmd)
		return 2
	}
	err := f(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, cmd, err)
	}
	return feed.ExitStatus(err)
}
