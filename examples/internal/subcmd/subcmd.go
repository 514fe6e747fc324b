// Package subcmd dispatches the subcommands of the example programs
// (ps-lr, ps-fm): "PROG [gen|eval|train] FLAGS…", training when no
// subcommand is named, and turns the outcome into the exit status.
package subcmd

import (
	"errors"
	"fmt"
	"io"

	"github.com/spindle-ps/spindle/feed"
)

// ErrUsage reports a usage error that the flag package already printed;
// the program exits with status 2.
var ErrUsage = errors.New("usage")

// Default is the subcommand that runs when args name none.
const Default = "train"

// Run runs the subcommand of prog that args[0] names among cmds (Default
// when it names none; args then all go to Default) with the remaining
// arguments, prints its error as "PROG CMD: ERR" on stderr and returns
// the exit status: 2 for ErrUsage, else feed.ExitStatus (75 when a
// synchronous worker died, for the launcher to restart the job).
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
	if errors.Is(err, ErrUsage) {
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, cmd, err)
	}
	return feed.ExitStatus(err)
}
