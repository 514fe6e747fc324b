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

// Elastic servers and workers, as the launcher sees them. The job's
// tracker decides the servers and workers of each epoch
// (tracker.State.View); the launcher starts a task for every server or
// worker rank a new target adds (tracker.State.Scale, heard through
// ScaleRequests), told to join (SPINDLE_JOINING=1, with DMLC_NUM_SERVER
// or DMLC_NUM_WORKER the target), and then treats it as any task of its
// role: shown, logged, restarted by the usual rules. Which servers and
// workers a launch is told of and whether it joins is decided when it
// starts: a task whose rank the job's servers or workers include
// replaces a member (no SPINDLE_JOINING, the current counts); one beyond
// them joins. A task the job's servers or workers leave out has left
// once it exits: a retired one (a switch to fewer left it out) whatever
// its exit, a joiner that exits 0 or that the job no longer wants too;
// neither is started again, nor fails the job.

// elastic reports whether the number of t's role may change while the
// job runs: a server of a job with servers, or a worker.
func (r *run) elastic(t *taskState) bool {
	return t.Role == conf.RoleWorker || t.Role == conf.RoleServer && r.spec.NumServers > 0
}

// counts returns the job's number of servers or workers (role) as of the
// newest decided epoch, and the number asked for.
func (r *run) counts(role conf.Role) (now, target int) {
	if role == conf.RoleWorker {
		return r.state.Workers(), r.state.WorkersTarget()
	}
	return r.state.Servers(), r.state.ScaleTarget()
}

// onScale starts the server and worker tasks that target adds and stops
// those started to join that it no longer needs.
func (r *run) onScale(ctx context.Context, target tracker.Target) error {
	r.log.WithFields(logrus.Fields{"servers": r.state.Servers(), "servers_target": target.Servers,
		"workers": r.state.Workers(), "workers_target": target.Workers}).Info("servers and workers asked for")
	if r.spec.NumServers > 0 {
		if err := r.scaleRole(ctx, conf.RoleServer, target.Servers); err != nil {
			return err
		}
	}
	return r.scaleRole(ctx, conf.RoleWorker, target.Workers)
}

// scaleRole starts the tasks of role that a target of target adds and
// stops those started to join that it no longer needs.
func (r *run) scaleRole(ctx context.Context, role conf.Role, target int) error {
	for _, t := range r.tasks {
		if t.Role == role && !t.done && r.state.ReleaseJoiner(t.Role, t.Rank) {
			r.dropJoiner(ctx, t, fmt.Sprintf("stopped: not needed once the job's target fell to %d %ss", target, role))
		}
	}
	if r.workersDone() {
		return nil // no epoch left to switch at
	}
	r.ensureTasks(role, target)
	now, _ := r.counts(role)
	for _, t := range r.tasks {
		if t.Role != role || t.Rank < now || t.Rank >= target || t.launch != 0 || (t.done && !t.gone) {
			continue
		}
		if err := r.join(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// join starts t (a server or a worker) to join the job, now or, while
// the scheduler's replacement waits to be placed, once it is
// (startRest).
func (r *run) join(ctx context.Context, t *taskState) error {
	t.done, t.gone = false, false
	if s := r.scheduler(); s != nil && !s.placed && !s.done {
		t.state = "pending"
		return nil
	}
	return r.start(ctx, t)
}

// dropJoiner stops t, a server or worker started to join and not needed
// (why says so), and counts it gone.
func (r *run) dropJoiner(ctx context.Context, t *taskState, why string) {
	r.stopLaunch(ctx, t)
	r.state.Exited(t.Role, t.Rank)
	t.done, t.gone, t.downSince = true, true, time.Time{}
	t.state, t.exit = "stopped", why
	r.log.WithField("task", t.String()).Info(why)
}

// stopLaunch stops t's launch, running or waiting to be placed, if it
// has one (Cluster.Stop), and forgets it: t is no longer needed, or no
// longer answers.
func (r *run) stopLaunch(ctx context.Context, t *taskState) {
	id := t.launch
	if id == 0 {
		return
	}
	delete(r.byLaunch, id)
	t.launch, t.placed, t.code = 0, false, -1
	if err := r.c.Stop(ctx, id); err != nil {
		r.log.WithError(err).WithField("task", t.String()).Warn("task not stopped")
	}
}

// left handles the exit of t, a server or a worker, when the job's
// servers or workers leave it out (its rank is tracker.State.Servers or
// Workers or more), and reports whether it did. A task that retired has
// left the job whatever its exit (started again to join when the target
// wants its rank back), as has a joiner that exits 0 or that the job no
// longer wants; a joiner the job still wants that failed is left to the
// usual rules (started again alone, within its attempts). Every such
// task's exit forgets that it joined; a worker that left failing gives
// its unfinished shards back.
func (r *run) left(ctx context.Context, t *taskState, ex Exit) (bool, error) {
	retiring := r.state.Retiring(t.Role, t.Rank)
	r.state.Exited(t.Role, t.Rank)
	now, target := r.counts(t.Role)
	wanted := t.Rank < target && !r.workersDone()
	if t.Rank < now || (ex.Code != 0 && !retiring && wanted) {
		return false, nil
	}
	t.done, t.gone = true, true
	t.state = "succeeded"
	if retiring {
		t.state = "retired"
	}
	if ex.Code != 0 {
		if t.Role == conf.RoleWorker {
			r.state.WorkerLost(t.Rank)
		}
		r.state.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventExited, Task: t.String(),
			Detail: fmt.Sprintf("%s; it had left the job's %ss, not started again", firstLine(ex.Desc), t.Role)})
	}
	r.log.WithFields(logrus.Fields{"task": t.String(), "exit": ex.Code, "retired": retiring}).Infof("%s left the job's %ss", t.Role, t.Role)
	if retiring && wanted {
		// Asked back while it left: it joins anew.
		return true, r.join(ctx, t)
	}
	return true, nil
}

// releaseJoiners stops the servers and workers started to join that
// still run or wait once every worker finished: no epoch is left for
// them to join.
func (r *run) releaseJoiners(ctx context.Context) {
	for _, t := range r.tasks {
		if !r.elastic(t) || t.done {
			continue
		}
		if now, _ := r.counts(t.Role); t.Rank >= now && !r.state.Retiring(t.Role, t.Rank) {
			r.dropJoiner(ctx, t, "stopped: every worker finished before it joined")
		}
	}
}

// ensureAll adds the server and worker tasks that the job's counts or
// targets need and it has not.
func (r *run) ensureAll() {
	for _, role := range []conf.Role{conf.RoleServer, conf.RoleWorker} {
		now, target := r.counts(role)
		r.ensureTasks(role, max(now, target))
	}
}

// ensureTasks adds a task of role (a server or a worker) for every rank
// below n that has none: a server after the last server, a worker after
// the last worker.
func (r *run) ensureTasks(role conf.Role, n int) {
	if role == conf.RoleServer && r.spec.NumServers == 0 {
		return
	}
	for rank := 0; rank < n; rank++ {
		if r.task(role, rank) != nil {
			continue
		}
		at := len(r.tasks)
		if role == conf.RoleServer {
			if w := slices.IndexFunc(r.tasks, func(t *taskState) bool { return t.Role == conf.RoleWorker }); w >= 0 {
				at = w
			}
		}
		r.tasks = slices.Insert(r.tasks, at, &taskState{Task: Task{Role: role, Rank: rank}, state: "pending"})
	}
}

// retireUnneeded counts gone, before the whole job starts again, the
// servers and workers beyond both the job's number of them and its
// target.
func (r *run) retireUnneeded() {
	for _, t := range r.tasks {
		if !r.elastic(t) {
			continue
		}
		if now, target := r.counts(t.Role); t.Rank >= max(now, target) {
			t.done, t.gone = true, true
			if t.state != "stopped" {
				t.state = "retired"
			}
		}
	}
}

// task is the task of role and rank, nil when it has none.
func (r *run) task(role conf.Role, rank int) *taskState {
	for _, t := range r.tasks {
		if t.Role == role && t.Rank == rank {
			return t
		}
	}
	return nil
}

// active counts the tasks of role the job has, the gone ones left out.
func (r *run) active(role conf.Role) int {
	n := 0
	for _, t := range r.tasks {
		if t.Role == role && !t.gone {
			n++
		}
	}
	return n
}

// workersDone reports whether every worker of the job's workers
// (tracker.State.Workers) exited 0; workers started to join, and those
// the job's workers left out, do not count.
func (r *run) workersDone() bool {
	n := r.state.Workers()
	for _, t := range r.tasks {
		if t.Role == conf.RoleWorker && t.Rank < n && !t.done {
			return false
		}
	}
	return true
}
