package job

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/ckpt"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/tracker"
)

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.Out = io.Discard
	return logrus.NewEntry(l)
}

// fake is a Cluster in this process: every launch is placed at once on
// its node (placeOf), unless hold says otherwise, and what happens next
// is up to the test's script, called at every Start. Run calls it from
// one goroutine, so it needs no lock.
type fake struct {
	t      *testing.T
	q      *EventQueue
	script func(f *fake, l Launch)
	// launches are every Start, in order; running those not ended.
	launches []Launch
	running  map[int64]Launch
	ports    int
	stopAlls int
	// onStopAll, when set, runs as StopAll begins, while the launches
	// still run.
	onStopAll func()
	// stopped are the launches stopped alone (Stop).
	stopped []Launch
	// startErr, when set, fails a Start.
	startErr func(l Launch) error
	// hold, when set and true for a launch, leaves it waiting for its
	// placement until the script calls place.
	hold func(l Launch) bool
	// schedulers are the tracker's answers to "where is the scheduler"
	// (tracker.State.Scheduler) as Run reported its status, each change
	// once, from the first report on.
	schedulers []string
	// j is the job under test, for scripts that reach its state.
	j *Job
}

func newFake(t *testing.T, script func(f *fake, l Launch)) *fake {
	f := &fake{t: t, q: NewEventQueue(), script: script, running: map[int64]Launch{}}
	t.Cleanup(f.q.Close)
	return f
}

func (f *fake) Name() string { return "fake" }

func (f *fake) SchedulerPort(context.Context) (int, error) {
	f.ports++
	return 40000 + f.ports, nil
}

func nodeOf(t Task) string { return fmt.Sprintf("node-%s-%d", t.Role, t.Rank) }

// placeOf is the node the fake places l on: its task's (nodeOf), and for
// a scheduler's later launches "node-scheduler-0-<launch>", so that the
// nodes of a scheduler and of its replacement differ.
func placeOf(l Launch) string {
	if l.Task.Role == conf.RoleScheduler && l.Seq > 0 {
		return fmt.Sprintf("%s-%d", nodeOf(l.Task), l.Seq)
	}
	return nodeOf(l.Task)
}

func (f *fake) Start(_ context.Context, l Launch) error {
	if f.startErr != nil {
		if err := f.startErr(l); err != nil {
			return err
		}
	}
	f.launches = append(f.launches, l)
	f.running[l.ID] = l
	if f.hold == nil || !f.hold(l) {
		f.place(l)
	}
	if f.script != nil {
		f.script(f, l)
	}
	return nil
}

// place places launch l on its node.
func (f *fake) place(l Launch) {
	f.q.Push(Event{Kind: Placed, ID: l.ID, Node: placeOf(l)})
}

// lose ends launch l as a cluster that took it away (Exit.Lost).
func (f *fake) lose(l Launch) {
	if _, ok := f.running[l.ID]; !ok {
		f.t.Errorf("loss of %s attempt %d, which does not run", l.Task, l.Attempt)
		return
	}
	delete(f.running, l.ID)
	f.q.Push(Event{Kind: Exited, ID: l.ID, Exit: Exit{Code: -100, Desc: "container lost with its node", Lost: true}})
}

// noteScheduler records the tracker's scheduler address when it changed
// (schedulers); the job calls it with every status.
func (f *fake) noteScheduler() {
	addr := f.j.State().Scheduler()
	if n := len(f.schedulers); n == 0 || f.schedulers[n-1] != addr {
		f.schedulers = append(f.schedulers, addr)
	}
}

// exit ends launch l with code.
func (f *fake) exit(l Launch, code int) {
	if _, ok := f.running[l.ID]; !ok {
		f.t.Errorf("exit of %s attempt %d, which does not run", l.Task, l.Attempt)
		return
	}
	delete(f.running, l.ID)
	f.q.Push(Event{Kind: Exited, ID: l.ID, Exit: Exit{Code: code, Desc: fmt.Sprintf("exit code %d", code),
		Tail: "    last words of " + l.Task.String()}})
}

// current is the running launch of task, if any.
func (f *fake) current(task Task) (Launch, bool) {
	for _, l := range f.running {
		if l.Task == task {
			return l, true
		}
	}
	return Launch{}, false
}

// Stop ends launch id as a cluster that stopped it: it no longer runs,
// and no exit is reported.
func (f *fake) Stop(_ context.Context, id int64) error {
	f.stopped = append(f.stopped, f.running[id])
	delete(f.running, id)
	return nil
}

func (f *fake) StopAll(context.Context) error {
	f.stopAlls++
	if f.onStopAll != nil {
		f.onStopAll()
	}
	clear(f.running)
	return nil
}

func (f *fake) Events() <-chan Event { return f.q.Out() }

// launchesOf lists the launches of task.
func (f *fake) launchesOf(task Task) []Launch {
	var out []Launch
	for _, l := range f.launches {
		if l.Task == task {
			out = append(out, l)
		}
	}
	return out
}

// envOf returns key in l's environment as placed.
func envOf(l Launch, key string) string {
	v := ""
	for _, kv := range l.Env(placeOf(l), nil) {
		if k, val, _ := strings.Cut(kv, "="); k == key {
			v = val
		}
	}
	return v
}

var (
	scheduler = Task{Role: conf.RoleScheduler}
	server0   = Task{Role: conf.RoleServer}
	worker0   = Task{Role: conf.RoleWorker}
	worker1   = Task{Role: conf.RoleWorker, Rank: 1}
)

// oldModel writes a complete model of one part, "old", into dir.
func oldModel(dir string) {
	for name, data := range map[string]string{"part-00000": "old", "_manifest.json": "{}", "_SUCCESS": ""} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			panic(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			panic(err)
		}
	}
}

// writeStaged writes the part of server l into the directory it was told
// (SPINDLE_OUTPUT), which must not be output, which still holds the
// model the job replaces, unchanged.
func writeStaged(f *fake, output string, l Launch) {
	out := envOf(l, conf.EnvOutput)
	if out == output || out == "" {
		f.t.Errorf("%s told to write the model into %q, while %s holds the model it replaces", l.Task, out, output)
	}
	if b, err := os.ReadFile(filepath.Join(output, "part-00000")); err != nil || string(b) != "old" {
		f.t.Errorf("the output's part while the job runs: %q, %v; want the old model's", b, err)
	}
	writeFile(f.t, filepath.Join(out, fmt.Sprintf("part-%05d", l.Task.Rank)), []byte("model"))
}

// onlyEntries checks that dir holds exactly the entries names.
func onlyEntries(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, names) {
		t.Errorf("%s holds %q, want %q", dir, got, names)
	}
}

// writeFile writes data to path, creating its directory.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// commitCheckpoint writes server 0's file of checkpoint n and commits it
// through the job's tracker, as a job's worker 0 of the current run does.
func commitCheckpoint(f *fake, dir string, n int) {
	f.t.Helper()
	if err := commitOfRun(f, dir, n, f.j.State().Run()); err != nil {
		f.t.Errorf("commit checkpoint %d: %v", n, err)
	}
}

// commitOfRun is commitCheckpoint by a worker 0 of the job's run run.
func commitOfRun(f *fake, dir string, n, run int) error {
	data := []byte(fmt.Sprintf("parameters after epoch %d", n))
	writeFile(f.t, filepath.Join(ckpt.Path(dir, n), ckpt.ServerFileName(0)), data)
	sum := sha256.Sum256(data)
	return f.j.State().CommitCheckpoint(f.t.Context(), tracker.CheckpointInfo{N: n, Epoch: n, NextEpoch: n, Run: run,
		Files: []tracker.CheckpointFile{{Name: ckpt.ServerFileName(0), Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}}})
}

// checkEvents compares a status's events, as "task kind: detail"
// ("kind: detail" for the whole job), with want.
func checkEvents(t *testing.T, ev []tracker.Event, want ...string) {
	t.Helper()
	var got []string
	for _, e := range ev {
		s := e.Kind + ": " + e.Detail
		if e.Task != "" {
			s = e.Task + " " + s
		}
		got = append(got, s)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

var server1 = Task{Role: conf.RoleServer, Rank: 1}

// replicatedServerLost is the script of a job of 2 servers and a worker
// in which server 1 dies with exit code 137 once every task runs and the
// worker asked for its input; the servers first report that their
// tables keep replicas when report is set. Every task ends with 0 once
// server 1 runs again.
func replicatedServerLost(output string, report bool) func(f *fake, l Launch) {
	killed := false
	return func(f *fake, l Launch) {
		if l.Task.Role == conf.RoleServer && report {
			f.j.State().AddEvent(tracker.Event{Kind: tracker.EventReplicated, Task: l.Task.String()})
		}
		if l.Task == server1 && killed {
			for _, task := range []Task{scheduler, server0, server1, worker0} {
				cur, _ := f.current(task)
				if task.Role == conf.RoleServer {
					writeFile(f.t, filepath.Join(output, fmt.Sprintf("part-%05d", task.Rank)), []byte("model"))
				}
				f.exit(cur, 0)
			}
			return
		}
		if l.Task == scheduler {
			return // runs to the end
		}
		for _, task := range []Task{server0, server1, worker0} {
			if _, ok := f.current(task); !ok {
				return
			}
		}
		killed = true
		f.j.State().Plan()
		srv, _ := f.current(server1)
		f.exit(srv, 137)
	}
}

// schedulerLost is the script of a job of tasks (its servers and
// workers) in which the scheduler dies with exit code 137 once every
// task runs and the workers asked for their input; the tasks follows
// says first report that they follow the scheduler through the tracker,
// and with ckpt set worker 0 commits checkpoint 1 there. after runs
// every launch that comes after the scheduler's death.
func schedulerLost(tasks []Task, follows func(Task) bool, ckpt string, after func(f *fake, l Launch)) func(f *fake, l Launch) {
	killed := false
	return func(f *fake, l Launch) {
		switch {
		case killed:
			after(f, l)
			return
		case l.Task == scheduler:
			return // runs until it dies
		}
		if follows(l.Task) {
			f.j.State().AddEvent(tracker.Event{Kind: tracker.EventFollows, Task: l.Task.String()})
		}
		for _, task := range tasks {
			if _, ok := f.current(task); !ok {
				return
			}
		}
		killed = true
		f.j.State().Plan()
		if ckpt != "" {
			commitCheckpoint(f, ckpt, 1)
		}
		sch, _ := f.current(scheduler)
		f.exit(sch, 137)
	}
}

// finish ends the running launches of tasks with 0 in that order,
// servers writing their part of the model in output first.
func finish(f *fake, output string, tasks ...Task) {
	for _, task := range tasks {
		cur, ok := f.current(task)
		if !ok {
			f.t.Errorf("%s does not run", task)
			continue
		}
		if task.Role == conf.RoleServer {
			writeFile(f.t, filepath.Join(output, fmt.Sprintf("part-%05d", task.Rank)), []byte("model"))
		}
		f.exit(cur, 0)
	}
}

// onlyScheduler is a script for the launches after the scheduler's death
// that fails the test at any launch but the scheduler's, and else runs
// then.
func onlyScheduler(then func(f *fake, l Launch)) func(f *fake, l Launch) {
	return func(f *fake, l Launch) {
		if l.Task != scheduler {
			f.t.Errorf("%s started again (attempt %d) after the scheduler's death", l.Task, l.Attempt)
			return
		}
		then(f, l)
	}
}

// checkScheduler checks the launches of a job whose scheduler was
// started again alone (on a new port, attempt 1) and of no other task
// but those of more.
func checkScheduler(t *testing.T, f *fake, res Result, tasks []Task, more ...Task) {
	t.Helper()
	if res.Restarts != 0 {
		t.Errorf("result %+v; want no restart of the whole job", res)
	}
	ls := f.launchesOf(scheduler)
	if len(ls) != 2 {
		t.Fatalf("the scheduler launched %d times, want 2", len(ls))
	}
	if p0, p1 := envOf(ls[0], conf.EnvRootPort), envOf(ls[1], conf.EnvRootPort); p0 != "40001" || p1 != "40002" {
		t.Errorf("the scheduler's ports %s, then %s; want 40001, then a new one, 40002", p0, p1)
	}
	if got := envOf(ls[1], conf.EnvNumAttempt); got != "1" {
		t.Errorf("the scheduler's second launch is attempt %q, want 1", got)
	}
	for _, task := range tasks {
		want := 1
		if slices.Contains(more, task) {
			want = 2
		}
		if n := len(f.launchesOf(task)); n != want {
			t.Errorf("%s launched %d times, want %d", task, n, want)
		}
	}
}

// TestRunPolicy checks every rule of Job.Run against a fake cluster.
func TestRunPolicy(t *testing.T) {
	t.Parallel()
	type env struct {
		dir    string // a temporary directory
		output string
		ckpt   string
		cancel context.CancelFunc
	}
	// ok ends every launch at once with 0, servers writing their part of
	// the model first.
	ok := func(e *env) func(f *fake, l Launch) {
		return func(f *fake, l Launch) {
			if l.Task.Role == conf.RoleServer && e.output != "" {
				writeFile(f.t, filepath.Join(e.output, fmt.Sprintf("part-%05d", l.Task.Rank)), []byte("model"))
			}
			f.exit(l, 0)
		}
	}
	// unless runs script for the launches it matches, ok for the others.
	unless := func(e *env, match func(f *fake, l Launch) bool, script func(f *fake, l Launch)) func(f *fake, l Launch) {
		return func(f *fake, l Launch) {
			if match(f, l) {
				script(f, l)
				return
			}
			ok(e)(f, l)
		}
	}
	// first matches the first launch of task.
	first := func(task Task) func(f *fake, l Launch) bool {
		return func(f *fake, l Launch) bool { return l.Task == task && len(f.launchesOf(task)) == 1 }
	}
	// every matches every launch of task.
	every := func(task Task) func(f *fake, l Launch) bool {
		return func(f *fake, l Launch) bool { return l.Task == task }
	}
	exitWith := func(code int) func(f *fake, l Launch) { return func(f *fake, l Launch) { f.exit(l, code) } }
	// overOldModel is a job with Overwrite over a complete model.
	overOldModel := func(e *env) JobSpec {
		oldModel(e.output)
		return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 1, Output: e.output, Overwrite: true}
	}

	tests := []struct {
		name string
		spec func(e *env) JobSpec
		// script returns the fake's script.
		script func(e *env) func(f *fake, l Launch)
		secret string
		// startErr, when set, fails the fake's Starts it returns an error for.
		startErr func(l Launch) error
		want     tracker.JobState
		// wantErr lists what the error says; none means no error.
		wantErr []string
		check   func(t *testing.T, e *env, f *fake, res Result, err error)
	}{
		{
			name:   "success commits the model",
			spec:   func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 1, Output: e.output} },
			script: ok,
			want:   tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if _, err := os.Stat(filepath.Join(e.output, "_SUCCESS")); err != nil {
					t.Errorf("no _SUCCESS: %v", err)
				}
				if res.Output != e.output || len(res.Tasks) != 4 || f.stopAlls != 0 {
					t.Errorf("result %+v, %d StopAll", res, f.stopAlls)
				}
				// The scheduler first; the others once it was placed, told
				// its node.
				if f.launches[0].Task != scheduler {
					t.Errorf("first launch %s", f.launches[0].Task)
				}
				for _, l := range f.launches[1:] {
					if got := envOf(l, conf.EnvRootURI); got != nodeOf(scheduler) {
						t.Errorf("%s: %s=%q, want the scheduler's node", l.Task, conf.EnvRootURI, got)
					}
				}
			},
		},
		{
			name: "no model when a task failed",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 1, Output: e.output} },
			script: func(e *env) func(f *fake, l Launch) {
				return unless(e, first(worker1), exitWith(3))
			},
			want:    tracker.Failed,
			wantErr: []string{"worker 1 failed: exit code 3 on attempt 1 of 1; its last lines:\n    last words of worker 1"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if _, err := os.Stat(filepath.Join(e.output, "_SUCCESS")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("_SUCCESS of a failed job: %v", err)
				}
				if res.Output != "" {
					t.Errorf("a failed job's output %q", res.Output)
				}
			},
		},
		{
			name: "a failed job removes the empty directories it made",
			spec: func(e *env) JobSpec {
				return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 1, Output: e.output, CheckpointDir: e.ckpt}
			},
			// No task writes anything.
			script:  func(e *env) func(f *fake, l Launch) { return exitWith(2) },
			want:    tracker.Failed,
			wantErr: []string{"scheduler 0 failed: exit code 2"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				for _, d := range []string{e.output, e.ckpt} {
					if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s after a failed job that wrote nothing: %v; want it removed", d, err)
					}
				}
			},
		},
		{
			name: "overwrite keeps a complete model until the new one is",
			spec: overOldModel,
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					if l.Task.Role == conf.RoleServer {
						writeStaged(f, e.output, l)
					}
					f.exit(l, 0)
				}
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if b, err := os.ReadFile(filepath.Join(e.output, "part-00000")); err != nil || string(b) != "model" {
					t.Errorf("the output's part after the job: %q, %v; want the new model's", b, err)
				}
				if _, err := os.Stat(filepath.Join(e.output, "_SUCCESS")); err != nil {
					t.Errorf("no _SUCCESS: %v", err)
				}
				if res.Output != e.output {
					t.Errorf("result's output %q, want %q", res.Output, e.output)
				}
				onlyEntries(t, e.dir, "model")
			},
		},
		{
			name: "overwrite that fails leaves the complete model as it was",
			spec: overOldModel,
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					switch l.Task.Role {
					case conf.RoleServer:
						writeStaged(f, e.output, l)
						f.exit(l, 0)
					case conf.RoleWorker:
						f.exit(l, 3)
					default:
						f.exit(l, 0)
					}
				}
			},
			want:    tracker.Failed,
			wantErr: []string{"worker 0 failed: exit code 3"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				for name, want := range map[string]string{"part-00000": "old", "_SUCCESS": ""} {
					if b, err := os.ReadFile(filepath.Join(e.output, name)); err != nil || string(b) != want {
						t.Errorf("the output's %s after the failed job: %q, %v; want %q, as before it", name, b, err, want)
					}
				}
				onlyEntries(t, e.dir, "model")
			},
		},
		{
			name: "a failed job keeps the directories the user made, and those with files",
			spec: func(e *env) JobSpec {
				if err := os.Mkdir(e.output, 0o755); err != nil {
					panic(err)
				}
				return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 1, Output: e.output, CheckpointDir: e.ckpt}
			},
			script: func(e *env) func(f *fake, l Launch) {
				return unless(e, every(scheduler), func(f *fake, l Launch) {
					writeFile(f.t, filepath.Join(e.ckpt, "ckpt-00000", "part"), []byte("state"))
					f.exit(l, 2)
				})
			},
			want:    tracker.Failed,
			wantErr: []string{"scheduler 0 failed: exit code 2"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				for _, d := range []string{e.output, e.ckpt} {
					if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
						t.Errorf("%s after a failed job: %v; want it kept", d, err)
					}
				}
			},
		},
		{
			name: "a worker that stopped answering is stopped and started again",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 2, Output: e.output} },
			script: func(e *env) func(f *fake, l Launch) {
				// Worker 1's first process hangs. The scheduler reports
				// a silence that began before it started (an earlier
				// process's: ignored), then its own.
				return unless(e, first(worker1), func(f *fake, l Launch) {
					now := time.Now()
					f.j.State().AddEvent(tracker.Event{At: now, Kind: tracker.EventUnresponsive, Task: "worker 1", Took: time.Hour})
					f.j.State().AddEvent(tracker.Event{At: now.Add(time.Second), Kind: tracker.EventUnresponsive, Task: "worker 1",
						Detail: "no heartbeat for 10s", Took: 500 * time.Millisecond})
				})
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				// (Its second launch may be stopped too, by the rule that
				// ends a restarted worker once the others are done.)
				if len(f.stopped) == 0 || f.stopped[0].Task != worker1 || f.stopped[0].Attempt != 0 {
					t.Errorf("stopped %+v; want worker 1's first launch first", f.stopped)
				}
				if n := len(f.launchesOf(worker1)); n != 2 {
					t.Errorf("worker 1 launched %d times; want 2", n)
				}
				if !exitedSaying(res, "worker 1", "stopped: not heard from for 500ms (no heartbeat for 10s)") {
					t.Errorf("no event says why worker 1 was stopped: %+v", res.Status.Events)
				}
			},
		},
		{
			name: "a worker that exits 0 without leaving the job is started again",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 2} },
			script: func(e *env) func(f *fake, l Launch) {
				// Worker 1's first process says it follows the scheduler,
				// then exits 0 without leaving: the scheduler declares it
				// dead. The loop sees the exit and the death in either
				// order, and the others wait for it past diedGrace. Its
				// second process leaves as it should, and all end.
				return func(f *fake, l Launch) {
					st := f.j.State()
					inc := fmt.Sprint(l.Attempt + 1)
					switch {
					case first(worker1)(f, l):
						st.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventFollows, Task: "worker 1", Detail: inc})
						// An earlier process's death, then its own.
						st.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventDied, Task: "worker 1", Detail: "7"})
						f.exit(l, 0)
						st.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventDied, Task: "worker 1", Detail: inc})
					case l.Task == worker1:
						st.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventFollows, Task: "worker 1", Detail: inc})
						for _, task := range []Task{worker1, worker0, server0, scheduler} {
							if r, ok := f.current(task); ok {
								f.exit(r, 0)
							}
						}
					}
				}
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if n := len(f.launchesOf(worker1)); n != 2 {
					t.Errorf("worker 1 launched %d times; want 2", n)
				}
				if n := len(f.launchesOf(worker0)); n != 1 {
					t.Errorf("worker 0 launched %d times; want 1", n)
				}
				if !exitedSaying(res, "worker 1", "exit code 0 without leaving the job (its node was not finalized; the others wait for it)") {
					t.Errorf("no event says why worker 1 started again: %+v", res.Status.Events)
				}
			},
		},
		{
			name: "a worker that exits 0 without leaving as the job ends is done",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 2, Output: e.output} },
			script: func(e *env) func(f *fake, l Launch) {
				// Both workers skip Finalize after their last barrier:
				// the scheduler declares them dead, and the server, then
				// the scheduler, end at once.
				return unless(e, func(f *fake, l Launch) bool { return l.Task.Role == conf.RoleWorker }, func(f *fake, l Launch) {
					st := f.j.State()
					st.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventFollows, Task: l.Task.String(), Detail: "1"})
					st.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventDied, Task: l.Task.String(), Detail: "1"})
					f.exit(l, 0)
				})
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				for _, w := range []Task{worker0, worker1} {
					if n := len(f.launchesOf(w)); n != 1 {
						t.Errorf("%s launched %d times; want 1", w, n)
					}
				}
			},
		},
		{
			name: "a worker that keeps exiting 0 without leaving the job fails it",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2} },
			script: func(e *env) func(f *fake, l Launch) {
				// The server waits for the worker, which never leaves.
				return func(f *fake, l Launch) {
					if l.Task == worker0 {
						st := f.j.State()
						st.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventFollows, Task: "worker 0", Detail: "1"})
						st.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventDied, Task: "worker 0", Detail: "1"})
						f.exit(l, 0)
					}
				}
			},
			want:    tracker.Failed,
			wantErr: []string{"worker 0 failed: exit code 0 without leaving the job (its node was not finalized; the others wait for it) on attempt 2 of 2"},
		},
		{
			name: "a worker that exits 0 before the nodes registered is started again",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 2} },
			script: func(e *env) func(f *fake, l Launch) {
				// The scheduler waits for the nodes; worker 1's first
				// process exits 0 at once. Once its second one runs,
				// every node registers and follows, and all exit 0.
				return func(f *fake, l Launch) {
					st := f.j.State()
					switch {
					case l.Task == scheduler:
						st.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventRegistering, Task: "scheduler 0"})
					case first(worker1)(f, l):
						f.exit(l, 0)
					case l.Task == worker1:
						for _, task := range []Task{server0, worker0, worker1} {
							st.AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventFollows, Task: task.String(), Detail: "1"})
							if r, ok := f.current(task); ok {
								f.exit(r, 0)
							}
						}
						if r, ok := f.current(scheduler); ok {
							f.exit(r, 0)
						}
					}
				}
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				for task, want := range map[Task]int{scheduler: 1, server0: 1, worker0: 1, worker1: 2} {
					if n := len(f.launchesOf(task)); n != want {
						t.Errorf("%s launched %d times; want %d", task, n, want)
					}
				}
				if !exitedSaying(res, "worker 1", "exit code 0 before its node joined the job (the others wait for it)") {
					t.Errorf("no event says why worker 1 started again: %+v", res.Status.Events)
				}
			},
		},
		{
			name: "worker retried, its shards queued again",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, MaxAttempts: 2} },
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					st := f.j.State()
					switch {
					case l.Task == worker0:
						// Runs until worker 1 failed.
					case first(worker1)(f, l):
						if sh, d, err := st.NextShard(0, 1, 0); err != nil || d != tracker.Given || sh.ID != 0 {
							f.t.Errorf("worker 1 got shard %+v %v %v, want shard 0", sh, d, err)
						}
						f.exit(l, 1)
					default:
						// Worker 1 started again: its shard went back to the
						// queue, and worker 0 takes it.
						sh, d, err := st.NextShard(0, 0, 0)
						if err != nil || d != tracker.Given || sh.ID != 0 {
							f.t.Errorf("worker 0 got shard %+v %v %v after worker 1 failed, want shard 0", sh, d, err)
						}
						if err := st.ShardDone(0, sh.ID, 0, 0, 10); err != nil {
							f.t.Error(err)
						}
						w0, _ := f.current(worker0)
						f.exit(w0, 0)
						f.exit(l, 0)
					}
				}
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				for _, tr := range res.Tasks {
					want := 1
					if tr.Rank == 1 {
						want = 2
					}
					if tr.Attempts != want || tr.ExitCode != 0 {
						t.Errorf("%s %d: %d attempts, exit %d; want %d, 0", tr.Role, tr.Rank, tr.Attempts, tr.ExitCode, want)
					}
				}
				if f.stopAlls != 0 || len(f.launches) != 3 || res.Restarts != 0 {
					t.Errorf("%d StopAll, %d launches, %d restarts: a worker's failure restarted more than the worker", f.stopAlls, len(f.launches), res.Restarts)
				}
				if got := envOf(f.launchesOf(worker1)[1], conf.EnvNumAttempt); got != "1" {
					t.Errorf("second attempt's %s=%q", conf.EnvNumAttempt, got)
				}
				// The status's events: the exit, then the return and how long
				// the worker was down.
				ev := f.j.State().Status().Events
				checkEvents(t, ev, "worker 1 exited: exit code 1", "worker 1 back: running again (attempt 1) in node-worker-1")
				if len(ev) == 2 && (ev[1].Took <= 0 || ev[1].Took > ev[1].At.Sub(ev[0].At)) {
					t.Errorf("worker 1 back after %v, its events %v apart", ev[1].Took, ev[1].At.Sub(ev[0].At))
				}
			},
		},
		{
			name: "attempts budget",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, MaxAttempts: 3} },
			script: func(e *env) func(f *fake, l Launch) {
				return unless(e, every(worker0), exitWith(3))
			},
			want:    tracker.Failed,
			wantErr: []string{"worker 0 failed: exit code 3 on attempt 3 of 3"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if n := len(f.launchesOf(worker0)); n != 3 {
					t.Errorf("worker 0 launched %d times, want 3", n)
				}
			},
		},
		{
			name: "scheduler lost before input: from scratch on a new port",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2} },
			script: func(e *env) func(f *fake, l Launch) {
				return unless(e, first(scheduler), exitWith(3))
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				ls := f.launchesOf(scheduler)
				if len(ls) != 2 || f.stopAlls != 1 || res.Restarts != 1 || res.ResumedFrom != "" {
					t.Fatalf("%d scheduler launches, %d StopAll, result %+v", len(ls), f.stopAlls, res)
				}
				if p0, p1 := envOf(ls[0], conf.EnvRootPort), envOf(ls[1], conf.EnvRootPort); p0 == p1 {
					t.Errorf("the scheduler started again on the same port %s", p0)
				}
				if n := len(f.launchesOf(server0)); n < 1 {
					t.Errorf("server launched %d times", n)
				}
			},
		},
		{
			name: "server lost after input, no checkpoint dir: fails naming the task and the dir",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 3} },
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					if l.Task == worker0 {
						f.j.State().Plan() // the worker asks for its input
						srv, _ := f.current(server0)
						f.exit(srv, 137)
					}
				}
			},
			want:    tracker.Failed,
			wantErr: []string{"server 0 failed: exit code 137", "CheckpointDir"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if n := len(f.launchesOf(scheduler)); n != 1 {
					t.Errorf("the scheduler launched %d times", n)
				}
			},
		},
		{
			// Worker 0 commits checkpoint 2 as the job is being stopped to
			// start again from checkpoint 1: had it been committed, the
			// new run would meet it when it takes checkpoint 2 itself.
			name: "a checkpoint of the run that ended is not committed",
			spec: func(e *env) JobSpec {
				return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2, CheckpointDir: e.ckpt, Output: e.output}
			},
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					switch {
					case first(server0)(f, l):
					case first(worker0)(f, l):
						f.j.State().Plan()
						commitCheckpoint(f, e.ckpt, 1)
						f.onStopAll = func() {
							f.onStopAll = nil
							if err := commitOfRun(f, e.ckpt, 2, 0); err == nil {
								f.t.Error("a checkpoint of the run that ended was committed as it stopped")
							}
						}
						srv, _ := f.current(server0)
						f.exit(srv, 1)
					default:
						ok(e)(f, l)
					}
				}
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				want := "file://" + filepath.Join(e.ckpt, "1")
				if res.Restarts != 1 || res.ResumedFrom != want {
					t.Errorf("result %+v; want 1 restart from %s", res, want)
				}
				m, err := ckpt.Latest(t.Context(), dfs.Local{}, e.ckpt, true)
				if err != nil || m.N != 1 {
					t.Errorf("newest checkpoint %d (%v), want 1", m.N, err)
				}
			},
		},
		{
			name: "server lost after input: the whole job from the newest checkpoint",
			spec: func(e *env) JobSpec {
				return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2, CheckpointDir: e.ckpt, Output: e.output}
			},
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					switch {
					case first(server0)(f, l):
						// Runs until it fails.
					case first(worker0)(f, l):
						f.j.State().Plan()
						commitCheckpoint(f, e.ckpt, 1)
						commitCheckpoint(f, e.ckpt, 2)
						srv, _ := f.current(server0)
						f.exit(srv, 1)
					default:
						ok(e)(f, l)
					}
				}
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				want := "file://" + filepath.Join(e.ckpt, "2")
				if res.Restarts != 1 || res.ResumedFrom != want || f.stopAlls != 1 {
					t.Errorf("result %+v with %d StopAll; want 1 restart from %s", res, f.stopAlls, want)
				}
				for _, task := range []Task{scheduler, server0, worker0} {
					ls := f.launchesOf(task)
					if len(ls) != 2 {
						t.Errorf("%s launched %d times, want 2", task, len(ls))
						continue
					}
					if got := envOf(ls[1], conf.EnvResumeFrom); got != want {
						t.Errorf("%s started again from %q, want %q", task, got, want)
					}
					if got := envOf(ls[1], conf.EnvResumeEpoch); got != "2" {
						t.Errorf("%s started again at epoch %q, want 2", task, got)
					}
				}
				if got := envOf(f.launchesOf(server0)[1], conf.EnvNumAttempt); got != "1" {
					t.Errorf("the failed server's next attempt is %q, want 1", got)
				}
				if got := envOf(f.launchesOf(worker0)[1], conf.EnvNumAttempt); got != "0" {
					t.Errorf("worker 0's attempt after the restart is %q, want 0", got)
				}
				ev := f.j.State().Status().Events
				checkEvents(t, ev, "server 0 exited: exit code 1",
					"job restart: server 0 failed: exit code 1 on attempt 1 of 2; from checkpoint "+want+" (epoch 2)",
					"job back: every task running again")
				if len(ev) == 3 && (ev[2].Took <= 0 || ev[2].Took > ev[2].At.Sub(ev[1].At)) {
					t.Errorf("the job back after %v, its events %v apart", ev[2].Took, ev[2].At.Sub(ev[1].At))
				}
			},
		},
		{
			name: "server lost with replicas: started again alone",
			spec: func(e *env) JobSpec {
				return JobSpec{NumWorkers: 1, NumServers: 2, Replicas: 1, MaxAttempts: 2, Output: e.output}
			},
			script: func(e *env) func(f *fake, l Launch) { return replicatedServerLost(e.output, true) },
			want:   tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if res.Restarts != 0 || f.stopAlls != 0 {
					t.Errorf("result %+v with %d StopAll; want no restart", res, f.stopAlls)
				}
				for _, task := range []Task{scheduler, server0, server1, worker0} {
					want := 1
					if task == server1 {
						want = 2
					}
					ls := f.launchesOf(task)
					if len(ls) != want {
						t.Errorf("%s launched %d times, want %d", task, len(ls), want)
						continue
					}
					if task.Role != conf.RoleScheduler && envOf(ls[0], conf.EnvReplicas) != "1" {
						t.Errorf("%s's %s is %q, want 1", task, conf.EnvReplicas, envOf(ls[0], conf.EnvReplicas))
					}
				}
				if got := envOf(f.launchesOf(server1)[1], conf.EnvNumAttempt); got != "1" {
					t.Errorf("the failed server's next attempt is %q, want 1", got)
				}
				ev := f.j.State().Status().Events
				if len(ev) != 2 || ev[0].Task != "server 1" || ev[0].Kind != tracker.EventExited || ev[1].Kind != tracker.EventBack {
					t.Errorf("events %+v: want server 1's exit and its return", ev)
				}
			},
		},
		{
			name: "server lost with replicas its program does not keep: the whole job",
			spec: func(e *env) JobSpec {
				return JobSpec{NumWorkers: 1, NumServers: 2, Replicas: 1, MaxAttempts: 2, Output: e.output}
			},
			script:  func(e *env) func(f *fake, l Launch) { return replicatedServerLost(e.output, false) },
			want:    tracker.Failed,
			wantErr: []string{"server 1 failed: exit code 137", "CheckpointDir"},
		},
		{
			name: "collective: a lost worker takes the whole job back to its checkpoint",
			spec: func(e *env) JobSpec {
				return JobSpec{NumWorkers: 2, Collective: true, MaxAttempts: 2, CheckpointDir: e.ckpt}
			},
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					switch {
					case first(scheduler)(f, l), first(worker0)(f, l):
						// Run until stopped.
					case first(worker1)(f, l):
						f.j.State().Plan()
						commitCheckpoint(f, e.ckpt, 1)
						f.exit(l, 137)
					default:
						ok(e)(f, l)
					}
				}
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				want := "file://" + filepath.Join(e.ckpt, "1")
				if res.Restarts != 1 || res.ResumedFrom != want || f.stopAlls != 1 {
					t.Errorf("result %+v with %d StopAll; want 1 restart from %s", res, f.stopAlls, want)
				}
				for _, task := range []Task{scheduler, worker0, worker1} {
					ls := f.launchesOf(task)
					if len(ls) != 2 {
						t.Errorf("%s launched %d times, want 2", task, len(ls))
						continue
					}
					if got := envOf(ls[1], conf.EnvResumeFrom); got != want {
						t.Errorf("%s started again from %q, want %q", task, got, want)
					}
					if got := envOf(ls[0], conf.EnvNumServer); got != "0" {
						t.Errorf("%s: %s=%q, want 0", task, conf.EnvNumServer, got)
					}
				}
				if root := envOf(f.launchesOf(worker0)[0], conf.EnvRootPort); root == "" {
					t.Error("a worker of a collective job was not told the scheduler's port")
				}
			},
		},
		{
			name: "collective: a lost worker without a checkpoint dir fails the job",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, Collective: true, MaxAttempts: 3} },
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					if first(worker1)(f, l) {
						f.j.State().Plan()
						f.exit(l, 1)
					}
				}
			},
			want:    tracker.Failed,
			wantErr: []string{"worker 1 failed: exit code 1", "collective job", "CheckpointDir"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if n := len(f.launchesOf(worker1)); n != 1 {
					t.Errorf("worker 1 launched %d times, want 1", n)
				}
			},
		},
		{
			name: "exit 75 restarts the job without using up attempts",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 2} },
			script: func(e *env) func(f *fake, l Launch) {
				return unless(e, first(worker1), exitWith(conf.ExitRestartJob))
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				ls := f.launchesOf(worker1)
				if len(ls) != 2 || ls[1].Attempt != 0 || res.Restarts != 1 {
					t.Fatalf("worker 1 launches %+v, %d restarts; want two of attempt 0 and one restart", ls, res.Restarts)
				}
				for _, tr := range res.Tasks {
					if tr.Attempts != 1 {
						t.Errorf("%s %d: %d attempts, want 1", tr.Role, tr.Rank, tr.Attempts)
					}
				}
			},
		},
		{
			// A server's failure would take the whole job back; bad input
			// would fail it again, so neither it nor the job starts again.
			name: "exit 65 fails the job at once",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 3} },
			script: func(e *env) func(f *fake, l Launch) {
				return unless(e, first(server0), exitWith(conf.ExitBadInput))
			},
			want:    tracker.Failed,
			wantErr: []string{"server 0 failed: exit code 65 on attempt 1 of 3, and is not started again", "its input or arguments are at fault"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if n := len(f.launchesOf(server0)); n != 1 || res.Restarts != 0 {
					t.Errorf("server 0 launched %d times, %d restarts; want 1 and none", n, res.Restarts)
				}
			},
		},
		{
			name: "restarts bounded by MaxAttempts",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2} },
			script: func(e *env) func(f *fake, l Launch) {
				return unless(e, every(worker0), exitWith(conf.ExitRestartJob))
			},
			want:    tracker.Failed,
			wantErr: []string{"worker 0 asked to start the whole job again", "started again 1 times already", "MaxAttempts 2"},
		},
		{
			// The scheduler's first launch fails before training, which
			// starts the job again from scratch and uses up its one
			// restart; a server lost once training began then fails the
			// job. What would have saved it is a checkpoint directory,
			// not more attempts, and the error says so.
			name: "a lost server after a restart from scratch names the checkpoint directory",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2} },
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					switch {
					case first(scheduler)(f, l):
						f.exit(l, 1)
					case l.Task == server0 && len(f.launchesOf(scheduler)) == 2:
						if _, d, err := f.j.State().NextShard(0, 0, 0); err != nil || d != tracker.Given {
							f.t.Errorf("worker 0 got no shard: %v %v", d, err)
						}
						f.exit(l, 1)
					}
				}
			},
			want:    tracker.Failed,
			wantErr: []string{"server 0 failed: exit code 1 on attempt 1 of 2", "no CheckpointDir to start again from"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if res.Restarts != 1 {
					t.Errorf("%d restarts, want 1 (after the scheduler's failure)", res.Restarts)
				}
			},
		},
		{
			// A worker whose synchronous step failed because another died
			// asks for the restart: the error is its, not a lost server's.
			name: "exit 75 after training began, without a checkpoint directory",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 3} },
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					if l.Task != worker0 {
						return
					}
					if _, d, err := f.j.State().NextShard(0, 0, 0); err != nil || d != tracker.Given {
						f.t.Errorf("worker 0 got no shard: %v %v", d, err)
					}
					f.exit(l, conf.ExitRestartJob)
				}
			},
			want: tracker.Failed,
			wantErr: []string{"worker 0 asked to start the whole job again (exit code 75)", "no CheckpointDir to start again from",
				"its last lines:\n    last words of worker 0"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if strings.Contains(err.Error(), "server") || strings.Contains(err.Error(), "cannot go on without it") {
					t.Errorf("the error blames a lost task: %v", err)
				}
			},
		},
		{
			name:   "kill over the tracker RPC",
			spec:   func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 1} },
			secret: "s3cret",
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					if l.Task == worker1 {
						ctls, err := f.j.Keys().ClientTLS()
						if err != nil {
							f.t.Error(err)
							return
						}
						c := tracker.NewClient(f.j.TrackerAddr(), "s3cret", tracker.WithTLS(ctls))
						defer c.Close()
						if err := c.Kill(f.t.Context(), "enough"); err != nil {
							f.t.Errorf("kill: %v", err)
						}
					}
				}
			},
			want:    tracker.Killed,
			wantErr: []string{"enough"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if !errors.Is(err, tracker.ErrKillRequested) || f.stopAlls != 1 {
					t.Errorf("error %v, %d StopAll", err, f.stopAlls)
				}
				for _, tr := range res.Tasks {
					if tr.ExitCode != -1 {
						t.Errorf("%s %d exit code %d, want -1 (stopped)", tr.Role, tr.Rank, tr.ExitCode)
					}
				}
			},
		},
		{
			name: "context cancelled",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 1} },
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					if l.Task == worker0 {
						e.cancel()
					}
				}
			},
			want: tracker.Killed,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if !errors.Is(err, context.Canceled) || f.stopAlls != 1 {
					t.Errorf("error %v, %d StopAll", err, f.stopAlls)
				}
			},
		},
		{
			name: "scheduler lost, every node follows it: started again alone on a new port",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2, Output: e.output} },
			script: func(e *env) func(f *fake, l Launch) {
				all := func(Task) bool { return true }
				return schedulerLost([]Task{server0, worker0}, all, "", onlyScheduler(func(f *fake, l Launch) {
					// The nodes register with the replacement and finish; it
					// ends before the last of them.
					finish(f, e.output, server0)
					f.exit(l, 0)
					finish(f, e.output, worker0)
				}))
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				checkScheduler(t, f, res, []Task{server0, worker0})
				if f.stopAlls != 0 {
					t.Errorf("%d StopAll", f.stopAlls)
				}
				if _, err := os.Stat(filepath.Join(e.output, "_SUCCESS")); err != nil {
					t.Errorf("no _SUCCESS: %v", err)
				}
				// The tracker told where each scheduler ran, and nothing
				// while none was placed.
				want := []string{"", "node-scheduler-0:40001", "", "node-scheduler-0-1:40002", ""}
				if !slices.Equal(f.schedulers, want) {
					t.Errorf("the tracker's scheduler went %q, want %q", f.schedulers, want)
				}
				checkEvents(t, f.j.State().Status().Events, "scheduler 0 exited: exit code 137",
					"scheduler 0 back: running again (attempt 1) in node-scheduler-0-1")
			},
		},
		{
			name: "scheduler lost, a node does not follow it: the whole job",
			spec: func(e *env) JobSpec {
				return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2, CheckpointDir: e.ckpt, Output: e.output}
			},
			script: func(e *env) func(f *fake, l Launch) {
				server := func(t Task) bool { return t.Role == conf.RoleServer }
				return schedulerLost([]Task{server0, worker0}, server, e.ckpt, ok(e))
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				want := "file://" + filepath.Join(e.ckpt, "1")
				if res.Restarts != 1 || res.ResumedFrom != want || f.stopAlls != 1 {
					t.Errorf("result %+v with %d StopAll; want 1 restart from %s", res, f.stopAlls, want)
				}
				for _, task := range []Task{scheduler, server0, worker0} {
					if n := len(f.launchesOf(task)); n != 2 {
						t.Errorf("%s launched %d times, want 2", task, n)
					}
				}
				if n := f.j.State().Following(); n != 1 {
					t.Errorf("%d tasks follow the scheduler, want 1", n)
				}
			},
		},
		{
			name: "a worker lost while the scheduler's replacement waits starts once it is placed",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 2, Output: e.output} },
			script: func(e *env) func(f *fake, l Launch) {
				all := func(Task) bool { return true }
				lost := schedulerLost([]Task{server0, worker0, worker1}, all, "", func(f *fake, l Launch) {
					switch l.Task {
					case scheduler:
						// Worker 1 fails before the replacement is placed.
						w1, _ := f.current(worker1)
						f.exit(w1, 1)
						f.place(l)
					case worker1:
						finish(f, e.output, server0, scheduler, worker0, worker1)
					default:
						f.t.Errorf("%s started again", l.Task)
					}
				})
				return func(f *fake, l Launch) {
					f.hold = func(l Launch) bool { return l.Task == scheduler && l.Seq > 0 }
					lost(f, l)
				}
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				checkScheduler(t, f, res, []Task{server0, worker0, worker1}, worker1)
				if ls := f.launchesOf(worker1); len(ls) == 2 {
					if host, port := envOf(ls[1], conf.EnvRootURI), envOf(ls[1], conf.EnvRootPort); host != "node-scheduler-0-1" || port != "40002" {
						t.Errorf("worker 1 started again told the scheduler is at %s:%s, want the replacement's node-scheduler-0-1:40002", host, port)
					}
				}
				checkEvents(t, f.j.State().Status().Events, "scheduler 0 exited: exit code 137", "worker 1 exited: exit code 1",
					"scheduler 0 back: running again (attempt 1) in node-scheduler-0-1", "worker 1 back: running again (attempt 1) in node-worker-1")
			},
		},
		{
			name: "scheduler fails after every node finished: not started again",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2, Output: e.output} },
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					switch {
					case l.Task == scheduler && len(f.launchesOf(scheduler)) == 1:
						// Runs until the end.
					case l.Task == worker0 && len(f.launchesOf(worker0)) == 1:
						f.j.State().Plan()
						finish(f, e.output, server0, worker0)
						sch, _ := f.current(scheduler)
						f.exit(sch, 137)
					case l.Task == server0 && len(f.launchesOf(server0)) == 1:
					default:
						f.t.Errorf("%s started again", l.Task)
					}
				}
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if _, err := os.Stat(filepath.Join(e.output, "_SUCCESS")); err != nil {
					t.Errorf("no _SUCCESS: %v", err)
				}
				if res.Restarts != 0 || f.stopAlls != 0 || len(f.launches) != 3 {
					t.Errorf("result %+v, %d StopAll, %d launches; want nothing started again", res, f.stopAlls, len(f.launches))
				}
				st := f.j.State().Status()
				if got := st.Tasks[0]; got.Task != "scheduler 0" || got.State != "finished" {
					t.Errorf("the scheduler's status %+v, want finished", got)
				}
				checkEvents(t, st.Events, "scheduler 0 exited: exit code 137; every other task had exited 0, not started again")
				if want := "2 of 3 tasks exited 0; the scheduler 0 (code 137) ended after them, no longer needed"; !strings.Contains(st.Diagnostics, want) {
					t.Errorf("diagnostics %q, want them to say %q", st.Diagnostics, want)
				}
			},
		},
		{
			name: "scheduler lost after every node finished: not started again",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 1, Output: e.output} },
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					if l.Task == worker1 {
						finish(f, e.output, server0, worker0, worker1)
						sch, _ := f.current(scheduler)
						f.lose(sch)
					}
				}
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if res.Restarts != 0 || f.stopAlls != 0 || len(f.launches) != 4 {
					t.Errorf("result %+v, %d StopAll, %d launches; want nothing started again", res, f.stopAlls, len(f.launches))
				}
				checkEvents(t, f.j.State().Status().Events, "scheduler 0 exited: container lost with its node; every other task had exited 0, not started again")
			},
		},
		{
			name: "scheduler's replacement still running when every node finished: stopped",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2, Output: e.output} },
			script: func(e *env) func(f *fake, l Launch) {
				all := func(Task) bool { return true }
				return schedulerLost([]Task{server0, worker0}, all, "", onlyScheduler(func(f *fake, l Launch) {
					finish(f, e.output, server0, worker0) // the replacement runs on
				}))
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				checkScheduler(t, f, res, []Task{server0, worker0})
				if _, err := os.Stat(filepath.Join(e.output, "_SUCCESS")); err != nil {
					t.Errorf("no _SUCCESS: %v", err)
				}
				if f.stopAlls != 1 || len(f.running) != 0 {
					t.Errorf("%d StopAll, still running %v; want the replacement stopped", f.stopAlls, f.running)
				}
				if got := f.j.State().Status().Tasks[0]; got.State != "finished" {
					t.Errorf("the scheduler's status %+v, want finished", got)
				}
				if got := f.schedulers[len(f.schedulers)-1]; got != "" {
					t.Errorf("the tracker's scheduler at the end %q, want none", got)
				}
			},
		},
		{
			name: "scheduler's replacement still waiting when every node finished: stopped",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2, Output: e.output} },
			script: func(e *env) func(f *fake, l Launch) {
				all := func(Task) bool { return true }
				lost := schedulerLost([]Task{server0, worker0}, all, "", onlyScheduler(func(f *fake, l Launch) {
					finish(f, e.output, server0, worker0) // the replacement is never placed
				}))
				return func(f *fake, l Launch) {
					f.hold = func(l Launch) bool { return l.Task == scheduler && l.Seq > 0 }
					lost(f, l)
				}
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				checkScheduler(t, f, res, []Task{server0, worker0})
				if f.stopAlls != 1 || len(f.running) != 0 {
					t.Errorf("%d StopAll, still running %v; want the replacement given up", f.stopAlls, f.running)
				}
				if want := []string{"", "node-scheduler-0:40001", ""}; !slices.Equal(f.schedulers, want) {
					t.Errorf("the tracker's scheduler went %q, want %q", f.schedulers, want)
				}
				if !strings.Contains(res.Summary(), "the scheduler 0 (code -1) ended after them, no longer needed") {
					t.Errorf("summary %q", res.Summary())
				}
			},
		},
		{
			name: "a worker started again is stopped once the servers wrote the model",
			spec: func(e *env) JobSpec {
				return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 2, Output: e.output}
			},
			// Worker 1 dies; worker 0 trains on its share, and the
			// servers and the scheduler finish as its new process starts.
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					switch {
					case l.Task == worker1 && len(f.launchesOf(worker1)) == 1:
						f.exit(l, 137)
					case l.Task == worker1:
						// Worker 0's exit is known last.
						finish(f, e.output, server0, scheduler, worker0)
					}
				}
			},
			want: tracker.Succeeded,
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if len(f.stopped) != 1 || f.stopped[0].Task != worker1 || f.stopped[0].Attempt != 1 {
					t.Errorf("stopped alone %+v, want worker 1's second launch", f.stopped)
				}
				if _, err := os.Stat(filepath.Join(e.output, "_SUCCESS")); err != nil {
					t.Errorf("no _SUCCESS: %v", err)
				}
				if want := "3 of 4 tasks exited 0; the worker 1 (code -1) ended after them, no longer needed"; !strings.Contains(res.Summary(), want) {
					t.Errorf("summary %q, want it to say %q", res.Summary(), want)
				}
			},
		},
		{
			name: "a worker on its first attempt is waited for after the servers finished",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 1, Output: e.output} },
			// The servers and the scheduler end while worker 1, never
			// restarted, runs: not this rule's case; it then fails.
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					if l.Task == worker1 {
						finish(f, e.output, worker0, server0, scheduler)
						f.exit(l, 3)
					}
				}
			},
			want:    tracker.Failed,
			wantErr: []string{"worker 1 failed: exit code 3"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if len(f.stopped) != 0 {
					t.Errorf("stopped alone %+v, want none", f.stopped)
				}
			},
		},
		{
			name: "the last lines of a failure that ends the job's restarts",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2} },
			// Server 0 fails first, then the scheduler once the job
			// started again: the job may not start a second time.
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) {
					if (l.Task == server0 && len(f.launchesOf(server0)) == 1) || (l.Task == scheduler && len(f.launchesOf(scheduler)) == 2) {
						f.exit(l, 3)
					}
				}
			},
			want: tracker.Failed,
			wantErr: []string{"scheduler 0 failed: exit code 3 on attempt 1 of 2", "started again 1 times already",
				"its last lines:\n    last words of scheduler 0"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				// Attempts as the error counts them: the scheduler's
				// second attempt never came.
				for _, tr := range res.Tasks {
					want := 1
					if tr.Role == conf.RoleServer {
						want = 2
					}
					if tr.Attempts != want {
						t.Errorf("%s %d: %d attempts, want %d", tr.Role, tr.Rank, tr.Attempts, want)
					}
				}
			},
		},
		{
			name: "a task the cluster could not start",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 3} },
			// Every task that starts runs until it is stopped.
			script: func(e *env) func(f *fake, l Launch) { return func(*fake, Launch) {} },
			startErr: func(l Launch) error {
				if l.Task == worker0 {
					return errors.New("fork/exec prog: no such file or directory")
				}
				return nil
			},
			want:    tracker.Failed,
			wantErr: []string{"no such file or directory"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				// Those started were stopped (killed); worker 0 never ran,
				// nor did worker 1, whose turn came after it.
				want := map[Task]bool{scheduler: false, server0: false, worker0: true, worker1: true}
				for _, tr := range res.Tasks {
					task := Task{Role: tr.Role, Rank: tr.Rank}
					if tr.NotStarted != want[task] || (!tr.NotStarted && tr.ExitCode != -1) {
						t.Errorf("%s: %+v; want not started %v, else killed", task, tr, want[task])
					}
				}
			},
		},
		{
			name: "cluster failure",
			spec: func(e *env) JobSpec { return JobSpec{NumWorkers: 1, MaxAttempts: 3} },
			script: func(e *env) func(f *fake, l Launch) {
				return func(f *fake, l Launch) { f.q.Push(Event{Kind: Failed, Err: errors.New("no containers for you")}) }
			},
			want:    tracker.Failed,
			wantErr: []string{"no containers for you"},
			check: func(t *testing.T, e *env, f *fake, res Result, err error) {
				if f.stopAlls != 1 {
					t.Errorf("%d StopAll", f.stopAlls)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			e := &env{dir: dir, output: filepath.Join(dir, "model"), ckpt: filepath.Join(dir, "ckpt")}
			// A bound, so that a job that never ends fails the test.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			e.cancel = cancel
			spec := tt.spec(e)
			spec.Command, spec.Inputs = []string{"prog"}, []string{"data"}
			f := newFake(t, tt.script(e))
			f.startErr = tt.startErr
			j, err := New(ctx, spec, Options{Log: quietLog(), Secret: tt.secret, OnStatus: func(tracker.Status) { f.noteScheduler() },
				Planner: func(context.Context, []string, int64) ([]tracker.Shard, error) {
					return []tracker.Shard{{URI: "file:///data", Length: 100}}, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			f.j = j
			res, err := j.Run(ctx, f)
			if res.State != tt.want {
				t.Errorf("job %v (%v), want %v", res.State, err, tt.want)
			}
			if len(tt.wantErr) == 0 && err != nil && tt.want == tracker.Succeeded {
				t.Errorf("error %v", err)
			}
			for _, w := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to say %q", err, w)
				}
			}
			if st := j.State().Status(); st.State != tt.want {
				t.Errorf("tracker's state %v, want %v", st.State, tt.want)
			}
			if tt.check != nil {
				tt.check(t, e, f, res, err)
			}
		})
	}
}

// The policy tests' jobs that wait for a server or worker which exited
// 0 without leaving judge its exit after a second.
func init() { diedGrace = time.Second }

// exitedSaying reports whether the job's events tell of task's exit
// with detail.
func exitedSaying(res Result, task, detail string) bool {
	return slices.ContainsFunc(res.Status.Events, func(ev tracker.Event) bool {
		return ev.Kind == tracker.EventExited && ev.Task == task && ev.Detail == detail
	})
}

// TestKeysFile checks that New writes the tasks' keys file, readable by
// the user only and without the tracker's private key, and that Close
// removes it.
func TestKeysFile(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j, err := New(ctx, JobSpec{Command: []string{"x"}, NumWorkers: 1, NumServers: 1, MaxAttempts: 1}, Options{Log: quietLog(), Secret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	path := j.KeysFile()
	k, err := conf.ReadJobKeys(path)
	if err != nil {
		j.Close()
		t.Fatal(err)
	}
	if k.Secret != "s3cret" || k.KeyPEM != "" || k.CertPEM != j.Keys().CertPEM {
		t.Errorf("keys file holds %+v", k)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("keys file after Close: %v", err)
	}
}

// TestEmptyInput: inputs that name only empty files fail the job before
// anything starts, naming them, rather than train on nothing and commit
// the initial model; one non-empty file among them is enough.
func TestEmptyInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty, other := filepath.Join(dir, "empty.libsvm"), filepath.Join(dir, "also-empty.libsvm")
	writeFile(t, empty, nil)
	writeFile(t, other, nil)
	planner := tracker.InputPlanner(localResolver())
	spec := JobSpec{Command: []string{"prog"}, NumWorkers: 1, MaxAttempts: 1, Inputs: []string{empty, dir + "/also-*"}, Output: filepath.Join(dir, "model")}
	if err := Check(t.Context(), spec, localResolver(), planner); !errors.Is(err, ErrEmptyInput) || !strings.Contains(err.Error(), empty+", "+dir+"/also-*") {
		t.Errorf("Check of empty inputs: %v; want ErrEmptyInput naming them", err)
	}
	if j, err := New(t.Context(), spec, Options{Log: quietLog(), Planner: planner}); !errors.Is(err, ErrEmptyInput) {
		if j != nil {
			j.Close()
		}
		t.Errorf("New over empty inputs: %v; want ErrEmptyInput", err)
	}
	writeFile(t, other, []byte("1 3:1\n"))
	if err := Check(t.Context(), spec, localResolver(), planner); err != nil {
		t.Errorf("Check with one non-empty input: %v", err)
	}
}

// openRefused is a Resolver of local files that cannot be opened.
type openRefused struct{ dfs.Local }

func (openRefused) Open(ctx context.Context, name string) (dfs.File, error) {
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
}

func (o openRefused) Resolve(ctx context.Context, uri string) (dfs.FileSystem, string, error) {
	_, name, err := localResolver().Resolve(ctx, uri)
	return o, name, err
}

// TestCheckOpensTheInput: Check fails a job whose first input file the
// workers could not open, before any task starts.
func TestCheckOpensTheInput(t *testing.T) {
	t.Parallel()
	in := filepath.Join(t.TempDir(), "train.libsvm")
	writeFile(t, in, []byte("1 3:1\n"))
	spec := JobSpec{Command: []string{"prog"}, NumWorkers: 1, MaxAttempts: 1, Inputs: []string{in}}
	if err := Check(t.Context(), spec, openRefused{}, tracker.InputPlanner(localResolver())); !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), in) {
		t.Errorf("Check of an input that cannot be opened: %v; want the open's error, naming %s", err, in)
	}
	if err := Check(t.Context(), spec, localResolver(), tracker.InputPlanner(localResolver())); err != nil {
		t.Errorf("Check of a readable input: %v", err)
	}
}
