package feed

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/launch"
	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/tracker"
)

// StartNode starts the node of a task launched by ps-submit as
// launch.Start does and, with a tracker (SPINDLE_TRACKER_ADDR, as
// ps-submit sets it), lets it outlive its scheduler: a server or worker
// asks the tracker where the launcher started the next scheduler and
// rejoins it (psnode.WithSchedulerLocator; the node owns its tracker
// client), and says so to the tracker once started (tracker.EventFollows),
// so that the launcher replaces a dead scheduler alone; a scheduler says
// when it begins to wait for the nodes (tracker.EventRegistering), and
// one that rebuilt its table from a running job's nodes reports
// tracker.EventRebuilt. On error nothing is left running.
func StartNode(ctx context.Context, lookup conf.Lookup, environ []string, log *logrus.Entry) (*psnode.Node, error) {
	began := time.Now()
	cfg, err := conf.FromEnv(conf.Default(), lookup)
	if err != nil {
		return nil, err
	}
	if cfg.Job.TrackerAddr == "" {
		return launch.Start(ctx, lookup, environ, log)
	}
	tc, err := tracker.ConfigClient(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.PS.Role == conf.RoleScheduler {
		// Until the nodes registered, a server or worker that exits 0
		// has not finished: the launcher starts it again.
		rctx, cancel := context.WithTimeout(ctx, reportTimeout)
		if err := tc.ReportEvent(rctx, tracker.Event{Kind: tracker.EventRegistering, Task: "scheduler 0"}); err != nil {
			log.WithError(err).Warn("could not report to the tracker")
		}
		cancel()
	}
	n, err := launch.Start(ctx, lookup, environ, log, psnode.WithSchedulerLocator(tc))
	if err != nil {
		_ = tc.Close() // Start closed the node, if it made one: closing again is harmless
		return nil, err
	}
	reportStarted(ctx, tc, n, time.Since(began), log)
	go reportLost(tc, n, log)
	if cfg.PS.Joining {
		// The tracker switches to the new count of servers once every
		// joining one is in the job.
		rctx, cancel := context.WithTimeout(ctx, reportTimeout)
		err := tc.ReportEvent(rctx, tracker.Event{Kind: tracker.EventJoined, Task: fmt.Sprintf("%s %d", n.Role(), n.Rank())})
		cancel()
		if err != nil {
			_ = n.Close()
			return nil, fmt.Errorf("report to the tracker that this node joined: %w", err)
		}
	}
	return n, nil
}

// reportLost reports to the tracker, until n is closed, each node n
// lost after it had not been heard from (psnode.Event.Silent;
// tracker.EventUnresponsive): a server or worker the scheduler n
// declared dead, or the scheduler a server or worker n lost. Its process
// may still run, stopped, hung or cut off, holding up the others, and
// only the launcher can end it. On the scheduler it also reports the
// servers and workers declared dead for another cause
// (tracker.EventDied): a process that exited 0 so never left the job. On
// the scheduler and the servers it reports the servers and workers that
// held up the others for conf.PS.StallTimeout while alive
// (tracker.EventStalled): a program hung in its own code. A report that
// fails is logged.
func reportLost(tc *tracker.Client, n *psnode.Node, log *logrus.Entry) {
	events, stop := n.Subscribe()
	defer stop()
	for {
		var ev psnode.Event
		select {
		case <-n.Done():
			return
		case ev = <-events:
		}
		var report tracker.Event
		switch {
		case ev.Kind == psnode.NodeDied && n.Role() == transport.RoleScheduler &&
			(ev.Node.Role == transport.RoleServer || ev.Node.Role == transport.RoleWorker):
			report = tracker.Event{Kind: tracker.EventUnresponsive, Task: fmt.Sprintf("%s %d", ev.Node.Role, ev.Node.Rank), Detail: ev.Reason, Took: ev.Silent}
			if ev.Silent <= 0 {
				// Its process ended, or has a successor: if it exited
				// 0, it did so without leaving the job.
				report.Kind, report.Detail = tracker.EventDied, strconv.FormatInt(ev.Node.Incarnation, 10)
			}
		case ev.Kind == psnode.NodeStalled:
			report = tracker.Event{Kind: tracker.EventStalled, Task: fmt.Sprintf("%s %d", ev.Node.Role, ev.Node.Rank), Detail: ev.Reason, Took: ev.Silent}
		case ev.Kind == psnode.SchedulerLost && ev.Silent > 0:
			report = tracker.Event{Kind: tracker.EventUnresponsive, Task: "scheduler 0", Detail: ev.Reason, Took: ev.Silent}
		default:
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
		err := tc.ReportEvent(ctx, report)
		cancel()
		if err != nil {
			log.WithError(err).WithFields(logrus.Fields{"task": report.Task, "event": report.Kind}).Warn("could not report a node's end to the tracker")
		}
	}
}

// reportTimeout bounds StartNode's report to the tracker.
const reportTimeout = 10 * time.Second

// reportStarted tells the tracker that n follows the scheduler, or, for
// a scheduler, that it replaced a dead one, and how long that took. A report
// that fails is logged: the launcher then takes the whole job back when
// the scheduler dies, as it would without the report.
func reportStarted(ctx context.Context, tc *tracker.Client, n *psnode.Node, took time.Duration, log *logrus.Entry) {
	ev := tracker.Event{Kind: tracker.EventFollows, Task: fmt.Sprintf("%s %d", n.Role(), n.Rank()), Detail: strconv.FormatInt(n.Self().Incarnation, 10)}
	if n.Role() == transport.RoleScheduler {
		if !n.Replaced() {
			return
		}
		ev = tracker.Event{Kind: tracker.EventRebuilt, Task: "scheduler 0", Took: took,
			Detail: fmt.Sprintf("the new scheduler rebuilt its node table from the %d running nodes", len(n.Nodes())-1)}
	}
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	if err := tc.ReportEvent(rctx, ev); err != nil {
		log.WithError(err).Warn("could not report to the tracker")
	}
}

// NewResolver is dfs.DefaultResolver for a task's program: it reaches
// local files and HDFS, configured the Hadoop way, and logs each time it
// picks up the newer delegation tokens the ApplicationMaster obtains for
// a long job on a Kerberos-secured cluster, or fails to.
func NewResolver(lookup conf.Lookup, log *logrus.Entry) (*dfs.Resolver, error) {
	r, err := dfs.DefaultResolver(lookup)
	if err != nil {
		return nil, err
	}
	r.OnTokens(func(next time.Time, err error) {
		if err != nil {
			log.WithError(err).Warn("newer delegation tokens not read yet; trying again")
			return
		}
		log.WithField("next", next.Format(time.RFC3339)).Info("newer delegation tokens read")
	})
	return r, nil
}
