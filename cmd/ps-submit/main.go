// Command ps-submit runs a Spindle or ps-lite job on this machine or on a
// YARN cluster; see package submit, or run ps-submit --help.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spindle-ps/spindle/submit"
	"github.com/spindle-ps/spindle/tracker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal stops the job, a second one ends ps-submit at
	// once (the tasks die with it).
	go func() { <-ctx.Done(); stop() }()
	if len(os.Args) > 1 && os.Args[1] == tracker.AMMode {
		// Inside YARN, as the job's ApplicationMaster.
		code := tracker.AMMain(ctx, os.Args[2:], os.Stderr, os.LookupEnv)
		stop()
		os.Exit(code)
	}
	code := submit.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv, os.Environ())
	stop()
	os.Exit(code)
}
