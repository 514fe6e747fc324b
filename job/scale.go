package job

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/tracker"
)

// Elastic servers, as the launcher sees them. The job's tracker decides
// the servers of each epoch (tracker.State.View); the launcher starts a
// server task for every rank a new target adds (tracker.State.Scale,
// heard through ScaleRequests), told to join (SPINDLE_JOINING=1, with
// DMLC_NUM_SERVER the target), and then treats it as any server: shown,
// logged, restarted by the usual rules. Which servers a launch is told
// of and whether it joins is decided when it starts: a server whose rank
// the job's servers include replaces a member (no SPINDLE_JOINING,
// DMLC_NUM_SERVER the current count); one beyond them joins. A server the
// job's servers leave out has left once it exits: a retired one (a
// switch to fewer servers left it out) whatever its exit, a joiner the
// job no longer wants too; neither is started again, nor fails the job.

// onScale starts the server tasks that target adds and stops those
// started to join that it no longer needs.
func (r *run) onScale(ctx context.Context, target int) error {
	if r.spec.NumServers == 0 {
		return nil
	}
	r.log.WithFields(logrus.Fields{"servers": r.state.Servers(), "target": target}).Info("servers asked for")
	for _, t := range r.tasks {
		if t.Role == conf.RoleServer && !t.done && r.state.ReleaseJoiner(t.Rank) {
			r.dropJoiner(ctx, t, fmt.Sprintf("stopped: not needed once the job's target fell to %d servers", target))
		}
	}
	if r.workersDone() {
		return nil // no epoch left to switch at
	}
	r.ensureServers(target)
	for _, t := range r.tasks {
		if t.Role != conf.RoleServer || t.Rank < r.state.Servers() || t.Rank >= target || t.launch != 0 || (t.done && !t.gone) {
			continue
		}
		if err := r.join(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// join starts server t to join the job, now or, while the scheduler's
// replacement waits to be placed, once it is (startRest).
func (r *run) join(ctx context.Context, t *taskState) error {
	t.done, t.gone = false, false
	if s := r.scheduler(); s != nil && !s.placed && !s.done {
		t.state = "pending"
		return nil
	}
	return r.start(ctx, t)
}

// dropJoiner stops server t, started to join and not needed (why says
// so), and counts it gone.
func (r *run) dropJoiner(ctx context.Context, t *taskState, why string) {
	if id := t.launch; id != 0 {
		delete(r.byLaunch, id)
		t.launch, t.placed, t.code = 0, false, -1
		if err := r.c.Stop(ctx, id); err != nil {
			r.log.WithError(err).WithField("task", t.String()).Warn("server not needed, but not stopped")
		}
	}
	r.state.ServerExited(t.Rank)
	t.done, t.gone, t.downSince = true, true, time.Time{}
	t.state, t.exit = "stopped", why
	r.log.WithField("task", t.String()).Info(why)
}

// serverLeft handles the exit of server t when the job's servers leave
// it out (its rank is tracker.State.Servers or more), and reports
// whether it did. A server that retired has left the job whatever its
// exit (started again to join when the target wants its rank back), as
// has a joiner that exits 0 or that the job no longer wants; a joiner
// the job still wants that failed is left to the usual rules (started
// again alone, within its attempts). Every server's exit forgets that it
// joined.
func (r *run) serverLeft(ctx context.Context, t *taskState, ex Exit) (bool, error) {
	retiring := r.state.Retiring(t.Rank)
	r.state.ServerExited(t.Rank)
	wanted := t.Rank < r.state.ScaleTarget() && !r.workersDone()
	if t.Rank < r.state.Servers() || (ex.Code != 0 && !retiring && wanted) {
		return false, nil
	}
	t.done, t.gone = true, true
	t.state = "succeeded"
	if retiring {
		t.state = "retired"
	}
	if ex.Code != 0 {
		r.state.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventExited, Task: t.String(),
			Detail: firstLine(ex.Desc) + "; it had left the job's servers, not started again"})
	}
	r.log.WithFields(logrus.Fields{"task": t.String(), "exit": ex.Code, "retired": retiring}).Info("server left the job's servers")
	if retiring && wanted {
		// Asked back while it handed its keys off: it joins anew.
		return true, r.join(ctx, t)
	}
	return true, nil
}

// releaseJoiners stops the servers started to join that still run or
// wait once every worker finished: no epoch is left for them to join.
func (r *run) releaseJoiners(ctx context.Context) {
	for _, t := range r.tasks {
		if t.Role == conf.RoleServer && !t.done && t.Rank >= r.state.Servers() && !r.state.Retiring(t.Rank) {
			r.dropJoiner(ctx, t, "stopped: every worker finished before it joined")
		}
	}
}

// ensureServers adds a server task for every rank below n that has none,
// after the last server in the task list.
func (r *run) ensureServers(n int) {
	if r.spec.NumServers == 0 {
		return
	}
	for rank := 0; rank < n; rank++ {
		if r.server(rank) != nil {
			continue
		}
		at := slices.IndexFunc(r.tasks, func(t *taskState) bool { return t.Role == conf.RoleWorker })
		if at < 0 {
			at = len(r.tasks)
		}
		r.tasks = slices.Insert(r.tasks, at, &taskState{Task: Task{Role: conf.RoleServer, Rank: rank}, state: "pending"})
	}
}

// retireUnneeded counts gone, before the whole job starts again, the
// servers beyond both the job's servers and its target.
func (r *run) retireUnneeded() {
	n := max(r.state.Servers(), r.state.ScaleTarget())
	for _, t := range r.tasks {
		if t.Role == conf.RoleServer && t.Rank >= n {
			t.done, t.gone = true, true
			if t.state != "stopped" {
				t.state = "retired"
			}
		}
	}
}

// server is the task of server rank, nil when it has none.
func (r *run) server(rank int) *taskState {
	for _, t := range r.tasks {
		if t.Role == conf.RoleServer && t.Rank == rank {
			return t
		}
	}
	return nil
}

// activeServers counts the server tasks the job has, the gone ones left
// out.
func (r *run) activeServers() int {
	n := 0
	for _, t := range r.tasks {
		if t.Role == conf.RoleServer && !t.gone {
			n++
		}
	}
	return n
}

// workersDone reports whether every worker exited 0.
func (r *run) workersDone() bool {
	for _, t := range r.tasks {
		if t.Role == conf.RoleWorker && !t.done {
			return false
		}
	}
	return true
}
