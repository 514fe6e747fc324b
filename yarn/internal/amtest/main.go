// Command amtest is a minimal YARN ApplicationMaster built on package
// yarn, used only by the package's integration tests. It registers, asks
// for -containers containers, runs a shell command in each, waits for
// them to complete and unregisters SUCCEEDED if every one exited 0,
// FAILED otherwise; with -stop it instead checks ContainerStatus and
// StopContainer. It logs to standard error.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/yarn"
)

func main() {
	n := flag.Int("containers", 2, "number of containers to run")
	exit := flag.Int("container-exit", 0, "exit status of the container command; 0 runs an echo")
	stopMode := flag.Bool("stop", false, "run sleep 600, wait until ContainerStatus says each process started, stop the containers "+
		"and succeed if they end KILLED_BY_APPMASTER")
	timeout := flag.Duration("timeout", 3*time.Minute, "give up (and unregister FAILED) after this long")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, *n, *exit, *stopMode); err != nil {
		log.Printf("amtest: %v", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n, exit int, stopMode bool) error {
	h, err := conf.LoadHadoop(os.LookupEnv)
	if err != nil {
		return err
	}
	am, err := yarn.NewAMClient(ctx, h.Conf, "")
	if err != nil {
		return err
	}
	defer am.Close()
	host, _ := os.Hostname()
	reg, err := am.Register(ctx, host, -1, "")
	if err != nil {
		return err
	}
	log.Printf("amtest: registered %s with %s: %+v", am.Attempt(), am.Addr(), reg)

	status, diag, err := runContainers(ctx, am, n, exit, stopMode)
	if err != nil {
		status, diag = yarn.FinalFailed, err.Error()
	}
	log.Printf("amtest: unregistering %v: %s", status, diag)
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer fcancel()
	if ferr := am.Finish(fctx, status, diag, ""); ferr != nil {
		return ferr
	}
	return err
}

func runContainers(ctx context.Context, am *yarn.AMClient, n, exit int, stopMode bool) (yarn.FinalStatus, string, error) {
	nm := yarn.NewNMClient(am)
	defer nm.Close()
	script := "echo hello from $CONTAINER_ID"
	if exit != 0 {
		script = fmt.Sprintf("echo exiting %d from $CONTAINER_ID; exit %d", exit, exit)
	}
	wantExit := int32(yarn.ExitSuccess)
	if stopMode {
		script, wantExit = "exec sleep 600", yarn.ExitKilledByAppMaster
	}
	launch := yarn.LaunchContext{Commands: []string{"/bin/sh", "-c", "'" + script + "'",
		"1><LOG_DIR>/stdout", "2><LOG_DIR>/stderr"}}

	running := map[yarn.ContainerID]bool{}
	var failures []string
	taken, done := 0, 0
	req := yarn.AllocateRequest{Asks: []yarn.Ask{{Priority: 1, Count: int32(n), Resource: yarn.Resource{MemoryMB: 128, VCores: 1}}}}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for done < n {
		req.Progress = float32(done) / float32(n)
		resp, err := am.Allocate(ctx, req)
		if err != nil {
			return 0, "", err
		}
		req = yarn.AllocateRequest{} // the ask stands until it is met
		if resp.Command != yarn.AMCommandNone {
			return 0, "", fmt.Errorf("resource manager sent AM command %d", resp.Command)
		}
		for _, c := range resp.Allocated {
			if taken >= n {
				log.Printf("amtest: releasing surplus container %v", c.ID)
				req.Releases = append(req.Releases, c.ID)
				continue
			}
			taken++
			if err := nm.StartContainer(ctx, c, launch); err != nil {
				log.Printf("amtest: start %v on %v: %v", c.ID, c.Node, err)
				failures = append(failures, fmt.Sprintf("container %v did not start: %v", c.ID, err))
				req.Releases = append(req.Releases, c.ID)
				done++
				continue
			}
			running[c.ID] = true
			log.Printf("amtest: started %v on %v", c.ID, c.Node)
			if stopMode {
				if err := checkAndStop(ctx, nm, c); err != nil {
					failures = append(failures, err.Error())
				}
			}
		}
		for _, s := range resp.Completed {
			if !running[s.ID] {
				continue
			}
			log.Printf("amtest: %v completed: exit status %d: %s", s.ID, s.ExitStatus, s.Diagnostics)
			if s.ExitStatus != wantExit {
				failures = append(failures, fmt.Sprintf("container %v exited with status %d", s.ID, s.ExitStatus))
			}
			delete(running, s.ID)
			done++
		}
		select {
		case <-ctx.Done():
			return 0, "", fmt.Errorf("%d of %d containers completed: %w", done, n, ctx.Err())
		case <-tick.C:
		}
	}
	if len(failures) > 0 {
		return yarn.FinalFailed, strings.Join(failures, "; "), nil
	}
	return yarn.FinalSucceeded, fmt.Sprintf("%d containers exited %d", n, wantExit), nil
}

// checkAndStop waits (bounded) until the NodeManager reports that c's
// process has started, then stops it. The state alone says RUNNING from
// the moment the NodeManager accepts a container, while it is still being
// localized, and a container stopped then may end with -1 instead of
// KILLED_BY_APPMASTER. So the sub-state decides, where the NodeManager
// sends one.
func checkAndStop(ctx context.Context, nm *yarn.NMClient, c yarn.Container) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		st, err := nm.ContainerStatus(ctx, c)
		if err != nil {
			return fmt.Errorf("container %v status: %w", c.ID, err)
		}
		if st.State == yarn.ContainerRunning && (st.SubState == yarn.SubRunning || st.SubState == 0) {
			log.Printf("amtest: %v is %v (%v); stopping it", c.ID, st.State, st.SubState)
			break
		}
		if i == 100 {
			return fmt.Errorf("container %v still %v (%v) after 10s", c.ID, st.State, st.SubState)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	if err := nm.StopContainer(ctx, c); err != nil {
		return fmt.Errorf("stop container %v: %w", c.ID, err)
	}
	return nil
}
