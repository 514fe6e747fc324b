// Command ps-submit runs a Spindle or ps-lite job on this machine or on a
// YARN cluster; see package submit, or run ps-submit --help.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spindle-ps/spindle/submit"
)

func main() {
	// SIGHUP (the terminal closed, the SSH session dropped) stops the job
	// like Ctrl-C: by default it would end ps-submit at once, leaving the
	// tasks' children, the job's keys and its socket directory behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// After the first signal stops the job, a second one ends ps-submit at
	// once (the tasks die with it).
	go func() { <-ctx.Done(); stop() }()
	code := submit.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv, os.Environ())
	stop()
	os.Exit(code)
}
