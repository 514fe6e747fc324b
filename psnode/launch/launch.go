// Package launch starts a psnode.Node the way a program launched by
// ps-submit (or by any ps-lite launcher) should: configuration from the
// environment contract, the ZeroMQ transport, and registration with the
// scheduler. It is the one place that joins psnode to its ZeroMQ
// transport, so that psnode itself builds without cgo.
//
// # Usage
//
//	node, err := launch.Start(ctx, os.LookupEnv, os.Environ(), log)
//	if err != nil { ... }
//	defer node.Close()
//	// run apps on node, then
//	err = node.Finalize(ctx)
package launch

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/transport/zmq"
)

// NewNode makes a node for cfg on a new ZeroMQ transport, with nodeOpts
// after its logger. The node owns the transport.
//
// Node traffic is encrypted and authenticated with ZeroMQ CURVE, with
// keys derived from the job secret (zmq.DeriveCurve), unless the job is
// Insecure or has no secret.
func NewNode(cfg conf.PS, log *logrus.Entry, nodeOpts ...psnode.Option) (*psnode.Node, error) {
	opts := zmq.Options{Local: cfg.Local, IPCDir: cfg.IPCDir, WaterMark: cfg.WaterMark, Logger: log, BusyPoll: cfg.BusyPoll}
	if cfg.JobSecret != "" && !cfg.Insecure {
		c, err := zmq.DeriveCurve([]byte(cfg.JobSecret))
		if err != nil {
			return nil, fmt.Errorf("launch: %w", err)
		}
		opts.Curve = c
	}
	tr, err := zmq.New(opts)
	if err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	n, err := psnode.New(cfg, tr, append([]psnode.Option{psnode.WithLogger(log)}, nodeOpts...)...)
	if err != nil {
		_ = tr.Close()
		return nil, err
	}
	return n, nil
}

// Config reads and validates the environment contract. environ (KEY=VALUE
// strings, as from os.Environ) is used only to warn about PS_* variables
// that nothing reads, most likely misspelt.
func Config(lookup conf.Lookup, environ []string, log *logrus.Entry) (conf.Config, error) {
	c, err := conf.FromEnv(conf.Default(), lookup)
	if err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	for _, k := range conf.UnknownKeys(environ) {
		log.WithField("variable", k).Warn("unknown PS_ environment variable ignored")
	}
	if c.PS.JobSecret == "" {
		log.Warn("no " + conf.EnvJobKeys + " nor " + conf.EnvJobSecret + ": any process that reaches the scheduler can join the job, and node traffic is plain")
	} else if c.PS.Insecure {
		log.Warn(conf.EnvInsecure + ": node traffic is plain and unauthenticated (no CURVE)")
	}
	return c, nil
}

// Start reads the configuration, makes the node, with opts after its
// logger, and starts it (register, node table, barrier). On error
// nothing is left running.
func Start(ctx context.Context, lookup conf.Lookup, environ []string, log *logrus.Entry, opts ...psnode.Option) (*psnode.Node, error) {
	c, err := Config(lookup, environ, log)
	if err != nil {
		return nil, err
	}
	switch {
	case c.PS.Verbose >= 1 && log.Logger.Level < logrus.DebugLevel:
		log.Logger.SetLevel(logrus.DebugLevel)
	}
	limitMemory(c, lookup, log)
	n, err := NewNode(c.PS, log, opts...)
	if err != nil {
		return nil, err
	}
	if err := n.Start(ctx); err != nil {
		_ = n.Close()
		return nil, err
	}
	return n, nil
}

// limitMemory sets the Go runtime's soft memory limit to three quarters
// of a task's memory on YARN (conf.Job.TaskMemoryMB, its container's
// size), so that the collector works harder as the heap nears it rather
// than let the process grow past the container and be killed; the last
// quarter is for what the Go runtime does not count (libzmq's buffers,
// the sealed frames' pool). It does nothing when the launcher gave no
// size or GOMEMLIMIT sets the limit, and in a job that does not run on
// YARN: there the sizes bound no container, and a limit below what a
// task needs would only keep its collector running.
func limitMemory(c conf.Config, lookup conf.Lookup, log *logrus.Entry) {
	memMB := c.Job.TaskMemoryMB
	if v, ok := lookup("GOMEMLIMIT"); memMB <= 0 || (ok && v != "") || c.PS.JobCluster != "yarn" {
		return
	}
	limit := int64(memMB) << 20 / 4 * 3
	debug.SetMemoryLimit(limit)
	log.WithField("limit_mb", limit>>20).Debug("Go memory limit set from the task's memory")
}
