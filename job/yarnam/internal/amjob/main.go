// Command amjob is a YARN ApplicationMaster that runs one job with
// yarnam.Run, used only by the yarnam package's integration tests.
// The job is a JSON job.JobSpec given as the only argument. It logs to
// standard error and exits 1 when the job does not succeed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/yarnam"
	"github.com/spindle-ps/spindle/yarn"
)

func main() {
	allocTimeout := flag.Duration("allocation-timeout", time.Minute, "fail when a task waits this long for a container")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := logrus.New()
	log.Out = os.Stderr
	log.SetLevel(logrus.DebugLevel)
	if err := run(ctx, logrus.NewEntry(log), *allocTimeout); err != nil {
		log.WithError(err).Error("amjob failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, log *logrus.Entry, allocTimeout time.Duration) error {
	if flag.NArg() != 1 {
		return fmt.Errorf("usage: amjob [flags] JOBSPEC-JSON")
	}
	var spec job.JobSpec
	if err := json.Unmarshal([]byte(flag.Arg(0)), &spec); err != nil {
		return fmt.Errorf("job spec: %w", err)
	}
	h, err := conf.LoadHadoop(os.LookupEnv)
	if err != nil {
		return err
	}
	am, err := yarn.NewAMClient(ctx, h.Conf, "")
	if err != nil {
		return err
	}
	defer am.Close()
	// The job's keys file (job.New writes one: this AM ships none) goes
	// into this container's directory, which the NodeManager removes with
	// the container, even when it kills this AM before its deferred
	// clean-up has run, as it does a killed application's.
	if wd, err := os.Getwd(); err == nil {
		if err := os.Setenv("TMPDIR", wd); err != nil {
			return err
		}
	}
	host := os.Getenv("NM_HOST") // the NodeManager's host: where the containers reach this AM
	if host == "" {
		host, _ = os.Hostname()
	}
	res, err := yarnam.Run(ctx, spec, yarnam.Options{
		AM:                am,
		Log:               log,
		Host:              host,
		AllocationTimeout: allocTimeout,
		NodeNamesWithPort: strings.EqualFold(h.Conf.GetDefault("yarn.scheduler.include-port-in-node-name", "false"), "true"),
	})
	log.WithFields(logrus.Fields{"state": res.State, "tasks": fmt.Sprintf("%+v", res.Tasks)}).Info("job ended")
	return err
}
