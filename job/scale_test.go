package job

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/ckpt"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/tracker"
)

var (
	server2 = Task{Role: conf.RoleServer, Rank: 2}
	worker2 = Task{Role: conf.RoleWorker, Rank: 2}
)

// scaleEnv is what a scale test's script and checks share.
type scaleEnv struct {
	output, ckpt string
}

// runScaled runs spec on a fake with script; onStatus, when set, is
// called with the fake and the env at every status the job reports (after every
// event, request and tick), from Run's goroutine.
func runScaled(t *testing.T, spec JobSpec, script func(e *scaleEnv) func(f *fake, l Launch), onStatus func(f *fake, e *scaleEnv)) (*scaleEnv, *fake, Result, error) {
	t.Helper()
	dir := t.TempDir()
	e := &scaleEnv{output: filepath.Join(dir, "model"), ckpt: filepath.Join(dir, "ckpt")}
	spec.Command, spec.Inputs, spec.Output = []string{"prog"}, []string{"data"}, e.output
	if spec.CheckpointDir == "ckpt" {
		spec.CheckpointDir = e.ckpt
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	f := newFake(t, script(e))
	j, err := New(ctx, spec, Options{Log: quietLog(),
		OnStatus: func(tracker.Status) {
			if onStatus != nil && f.j != nil {
				onStatus(f, e)
			}
		},
		Planner: func(context.Context, []string, int64) ([]tracker.Shard, error) {
			return []tracker.Shard{{URI: "file:///data", Length: 100}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	f.j = j
	res, err := j.Run(ctx, f)
	return e, f, res, err
}

// joinedEvent reports that the server of l joined, as a joining server
// does once ready.
func joinedEvent(f *fake, l Launch) {
	f.j.State().AddEvent(tracker.Event{At: time.Now(), Kind: tracker.EventJoined, Task: l.Task.String(), Detail: "ready"})
}

// scaleTo asks for servers servers, as ps-submit scale does.
func scaleTo(f *fake, servers int) {
	f.t.Helper()
	if err := f.j.State().Scale(servers, 0); err != nil {
		f.t.Errorf("scale to %d: %v", servers, err)
	}
}

// scaleWorkersTo asks for workers workers, as ps-submit scale does.
func scaleWorkersTo(f *fake, workers int) {
	f.t.Helper()
	if err := f.j.State().Scale(0, workers); err != nil {
		f.t.Errorf("scale to %d workers: %v", workers, err)
	}
}

// viewOf asks for the servers of epoch, as a worker does, and checks the
// answer.
func viewOf(f *fake, epoch, want int) {
	f.t.Helper()
	if got, _ := f.j.State().View(epoch); got != want {
		f.t.Errorf("view of epoch %d: %d servers, want %d", epoch, got, want)
	}
}

// viewBothOf asks for the servers and workers of epoch, as a worker
// does, and checks the answer.
func viewBothOf(f *fake, epoch, servers, workers int) {
	f.t.Helper()
	if gs, gw := f.j.State().View(epoch); gs != servers || gw != workers {
		f.t.Errorf("view of epoch %d: %d servers and %d workers, want %d and %d", epoch, gs, gw, servers, workers)
	}
}

// taskState is task's state as the status shows it.
func taskStateOf(f *fake, task Task) string {
	for _, ts := range f.j.State().Status().Tasks {
		if ts.Task == task.String() {
			return ts.State
		}
	}
	return ""
}

// modelParts reads the committed model's manifest and returns its parts.
func modelParts(t *testing.T, output string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(output, "_manifest.json"))
	if err != nil {
		t.Fatalf("the model's manifest: %v", err)
	}
	var m model.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return len(m.Parts)
}

// checkJoining checks the environment of launch l: whether it joins, the
// servers it is told of and its attempt.
func checkJoining(t *testing.T, l Launch, joining bool, servers, attempt int) {
	t.Helper()
	wantJoin := ""
	if joining {
		wantJoin = "1"
	}
	got := fmt.Sprintf("%s=%q %s=%s %s=%s", conf.EnvJoining, envOf(l, conf.EnvJoining), conf.EnvNumServer, envOf(l, conf.EnvNumServer),
		conf.EnvNumAttempt, envOf(l, conf.EnvNumAttempt))
	want := fmt.Sprintf("%s=%q %s=%d %s=%d", conf.EnvJoining, wantJoin, conf.EnvNumServer, servers, conf.EnvNumAttempt, attempt)
	if got != want {
		t.Errorf("%s launch %d: %s, want %s", l.Task, l.Seq, got, want)
	}
}

// checkWorkerJoining checks the environment of launch l: whether it
// joins, the workers and servers it is told of and its attempt.
func checkWorkerJoining(t *testing.T, l Launch, joining bool, workers, servers, attempt int) {
	t.Helper()
	wantJoin := ""
	if joining {
		wantJoin = "1"
	}
	got := fmt.Sprintf("%s=%q %s=%s %s=%s %s=%s", conf.EnvJoining, envOf(l, conf.EnvJoining), conf.EnvNumWorker, envOf(l, conf.EnvNumWorker),
		conf.EnvNumServer, envOf(l, conf.EnvNumServer), conf.EnvNumAttempt, envOf(l, conf.EnvNumAttempt))
	want := fmt.Sprintf("%s=%q %s=%d %s=%d %s=%d", conf.EnvJoining, wantJoin, conf.EnvNumWorker, workers, conf.EnvNumServer, servers,
		conf.EnvNumAttempt, attempt)
	if got != want {
		t.Errorf("%s launch %d: %s, want %s", l.Task, l.Seq, got, want)
	}
}

// rolesOf is the status's roles, "role succeeded/want", in order.
func rolesOf(st tracker.Status) string {
	var roles []string
	for _, r := range st.Roles {
		roles = append(roles, fmt.Sprintf("%s %d/%d", r.Role, r.Succeeded, r.Want))
	}
	return strings.Join(roles, ", ")
}

// TestScaleOut: a scale-up starts the new ranks, told to join the
// target, as ordinary tasks; the job switches once they joined and
// commits the model of every server of its last epoch.
func TestScaleOut(t *testing.T) {
	t.Parallel()
	e, f, res, err := runScaled(t, JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2}, func(e *scaleEnv) func(f *fake, l Launch) {
		return func(f *fake, l Launch) {
			switch l.Task {
			case worker0:
				f.j.State().Plan()
				viewOf(f, 0, 1)
				scaleTo(f, 3)
			case server1:
				joinedEvent(f, l)
			case server2:
				joinedEvent(f, l)
				viewOf(f, 1, 3)
				finish(f, e.output, server0, server1, server2, worker0, scheduler)
			}
		}
	}, nil)
	if res.State != tracker.Succeeded || err != nil {
		t.Fatalf("job %v: %v", res.State, err)
	}
	checkJoining(t, f.launchesOf(server0)[0], false, 1, 0)
	checkJoining(t, f.launchesOf(worker0)[0], false, 1, 0)
	for _, task := range []Task{server1, server2} {
		ls := f.launchesOf(task)
		if len(ls) != 1 {
			t.Fatalf("%s launched %d times, want once", task, len(ls))
		}
		checkJoining(t, ls[0], true, 3, 0)
		if got := envOf(ls[0], conf.EnvServerID); got != fmt.Sprint(task.Rank) {
			t.Errorf("%s: %s=%q", task, conf.EnvServerID, got)
		}
		if got := taskStateOf(f, task); got != "succeeded" {
			t.Errorf("%s is %q, want succeeded", task, got)
		}
	}
	if n := modelParts(t, e.output); n != 3 {
		t.Errorf("the model has %d parts, want the 3 of the last epoch's servers", n)
	}
	var roles []string
	for _, r := range res.Status.Roles {
		roles = append(roles, fmt.Sprintf("%s %d/%d", r.Role, r.Succeeded, r.Want))
	}
	if got := strings.Join(roles, ", "); got != "scheduler 1/1, server 3/3, worker 1/1" {
		t.Errorf("roles %s", got)
	}
	var events []string
	for _, ev := range res.Status.Events {
		events = append(events, ev.Kind)
	}
	if got := strings.Join(events, " "); got != "scale joined joined scaling" {
		t.Errorf("events %s", got)
	}
}

// TestScaleInRetiredServerLeaves: a server a switch to fewer servers
// left out exits 0 while the others train on; that is its end alone,
// neither a failure nor a restart nor the job's end, and the job
// succeeds with the model of the servers it kept.
func TestScaleInRetiredServerLeaves(t *testing.T) {
	t.Parallel()
	retired := false
	e, f, res, err := runScaled(t, JobSpec{NumWorkers: 1, NumServers: 3, MaxAttempts: 1}, func(e *scaleEnv) func(f *fake, l Launch) {
		return func(f *fake, l Launch) {
			if l.Task != worker0 {
				return
			}
			f.j.State().Plan()
			viewOf(f, 0, 3)
			scaleTo(f, 2)
			viewOf(f, 1, 2)
			if !f.j.State().Retiring(conf.RoleServer, 2) {
				f.t.Error("server 2 does not retire")
			}
			srv, _ := f.current(server2)
			f.exit(srv, 0)
		}
	}, func(f *fake, e *scaleEnv) {
		if retired || taskStateOf(f, server2) != "retired" {
			return
		}
		retired = true
		// The job goes on: nothing stopped, no other task ended.
		if f.stopAlls != 0 || len(f.running) != 4 {
			f.t.Errorf("after server 2 retired: %d StopAll, %d launches running; want none stopped and 4 running", f.stopAlls, len(f.running))
		}
		finish(f, e.output, server0, server1, worker0, scheduler)
	})
	if res.State != tracker.Succeeded || err != nil {
		t.Fatalf("job %v: %v", res.State, err)
	}
	if !retired {
		t.Fatal("server 2 never showed as retired")
	}
	if n := len(f.launchesOf(server2)); n != 1 || res.Restarts != 0 {
		t.Errorf("server 2 launched %d times, %d restarts of the job; want once, none", n, res.Restarts)
	}
	if n := modelParts(t, e.output); n != 2 {
		t.Errorf("the model has %d parts, want the 2 of the last epoch's servers", n)
	}
	if _, err := os.Stat(filepath.Join(e.output, "part-00002")); err == nil {
		t.Error("the retired server wrote a part")
	}
	if want := "all 4 tasks exited 0; 1 server left the job as it scaled, which ended with 2 servers"; !strings.Contains(res.Summary(), want) {
		t.Errorf("summary %q, want it to say %q", res.Summary(), want)
	}
	for _, ev := range res.Status.Events {
		if ev.Kind == tracker.EventExited {
			t.Errorf("event %+v: the retired server's end is not an exit to report", ev)
		}
	}
}

// TestScaleJoinerFailsThenNotNeeded: a server started to join that fails
// before it joined is started again alone, joining still; lowering the
// target before the switch stops the joiners, and the job succeeds
// without them.
func TestScaleJoinerFailsThenNotNeeded(t *testing.T) {
	t.Parallel()
	stopped := false
	e, f, res, err := runScaled(t, JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2}, func(e *scaleEnv) func(f *fake, l Launch) {
		return func(f *fake, l Launch) {
			switch {
			case l.Task == worker0:
				f.j.State().Plan()
				viewOf(f, 0, 1)
				scaleTo(f, 3)
			case l.Task == server1 && l.Attempt == 0:
				f.exit(l, 1)
			case l.Task == server1:
				scaleTo(f, 1) // changed one's mind before the switch
			}
		}
	}, func(f *fake, e *scaleEnv) {
		if stopped || len(f.stopped) < 2 {
			return
		}
		stopped = true
		viewOf(f, 1, 1)
		finish(f, e.output, server0, worker0, scheduler)
	})
	if res.State != tracker.Succeeded || err != nil {
		t.Fatalf("job %v: %v", res.State, err)
	}
	ls := f.launchesOf(server1)
	if len(ls) != 2 {
		t.Fatalf("server 1 launched %d times, want twice", len(ls))
	}
	checkJoining(t, ls[1], true, 3, 1)
	var names []string
	for _, l := range f.stopped {
		names = append(names, l.Task.String())
	}
	if got := strings.Join(names, ", "); got != "server 1, server 2" {
		t.Errorf("stopped %s, want server 1, server 2", got)
	}
	for _, task := range []Task{server1, server2} {
		if got := taskStateOf(f, task); got != "stopped" {
			t.Errorf("%s is %q, want stopped", task, got)
		}
	}
	if n := modelParts(t, e.output); n != 1 {
		t.Errorf("the model has %d parts, want 1", n)
	}
}

// TestScaleMemberReplacedDoesNotJoin: a server of the job's servers
// that dies after a scale-up is replaced as any member is (here from
// its replicas): its new process does not join, and is told the job's
// servers now.
func TestScaleMemberReplacedDoesNotJoin(t *testing.T) {
	t.Parallel()
	killed := false
	_, f, res, err := runScaled(t, JobSpec{NumWorkers: 1, NumServers: 2, Replicas: 1, MaxAttempts: 2}, func(e *scaleEnv) func(f *fake, l Launch) {
		return func(f *fake, l Launch) {
			if l.Task.Role == conf.RoleServer {
				f.j.State().AddEvent(tracker.Event{Kind: tracker.EventReplicated, Task: l.Task.String()})
			}
			switch {
			case l.Task == worker0:
				f.j.State().Plan()
				viewOf(f, 0, 2)
				scaleTo(f, 3)
			case l.Task == server2:
				joinedEvent(f, l)
				viewOf(f, 1, 3)
				killed = true
				srv, _ := f.current(server1)
				f.exit(srv, 137)
			case l.Task == server1 && killed:
				finish(f, e.output, server0, server1, server2, worker0, scheduler)
			}
		}
	}, nil)
	if res.State != tracker.Succeeded || err != nil {
		t.Fatalf("job %v: %v", res.State, err)
	}
	ls := f.launchesOf(server1)
	if len(ls) != 2 || res.Restarts != 0 {
		t.Fatalf("server 1 launched %d times, %d restarts of the job; want twice, none", len(ls), res.Restarts)
	}
	checkJoining(t, ls[1], false, 3, 1)
}

// commitServersCheckpoint writes the files of checkpoint n of servers
// servers and commits it through the job's tracker.
func commitServersCheckpoint(f *fake, dir string, n, servers int) {
	f.t.Helper()
	var files []tracker.CheckpointFile
	for r := range servers {
		data := []byte(fmt.Sprintf("server %d after epoch %d", r, n))
		writeFile(f.t, filepath.Join(ckpt.Path(dir, n), ckpt.ServerFileName(r)), data)
		sum := sha256.Sum256(data)
		files = append(files, tracker.CheckpointFile{Name: ckpt.ServerFileName(r), Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	}
	if err := f.j.State().CommitCheckpoint(f.t.Context(), tracker.CheckpointInfo{N: n, Epoch: n, NextEpoch: n, Files: files}); err != nil {
		f.t.Errorf("commit checkpoint %d: %v", n, err)
	}
}

// TestScaleThenRestartFromCheckpoint: a checkpoint taken after a
// scale-up records the servers that wrote it; when a server without
// replicas dies, the whole job starts again from it with those servers,
// every one a member.
func TestScaleThenRestartFromCheckpoint(t *testing.T) {
	t.Parallel()
	e, f, res, err := runScaled(t, JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2, CheckpointDir: "ckpt"}, func(e *scaleEnv) func(f *fake, l Launch) {
		return func(f *fake, l Launch) {
			switch {
			case l.Task == worker0 && l.Seq == 0:
				f.j.State().Plan()
				viewOf(f, 0, 1)
				scaleTo(f, 2)
			case l.Task == server1 && l.Seq == 0:
				joinedEvent(f, l)
				viewOf(f, 1, 2)
				commitServersCheckpoint(f, e.ckpt, 1, 2)
				srv, _ := f.current(server0)
				f.exit(srv, 1)
			case l.Task == worker0:
				viewOf(f, 1, 2)
				finish(f, e.output, server0, server1, worker0, scheduler)
			}
		}
	}, nil)
	if res.State != tracker.Succeeded || err != nil {
		t.Fatalf("job %v: %v", res.State, err)
	}
	if res.Restarts != 1 {
		t.Errorf("%d restarts of the job, want 1", res.Restarts)
	}
	b, err := os.ReadFile(filepath.Join(ckpt.Path(e.ckpt, 1), ckpt.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m ckpt.Manifest
	if err := json.Unmarshal(b, &m); err != nil || m.Servers != 2 {
		t.Errorf("checkpoint 1 written by %d servers (%v), want 2", m.Servers, err)
	}
	ls := f.launchesOf(server1)
	if len(ls) != 2 {
		t.Fatalf("server 1 launched %d times, want twice", len(ls))
	}
	checkJoining(t, ls[0], true, 2, 0)
	checkJoining(t, ls[1], false, 2, 0)
	checkJoining(t, f.launchesOf(worker0)[1], false, 2, 0)
	if n := modelParts(t, e.output); n != 2 {
		t.Errorf("the model has %d parts, want 2", n)
	}
}

// writeCommittedCheckpoint commits checkpoint n, of the epochs before
// n, in ckptDir: one small file per server.
func writeCommittedCheckpoint(t *testing.T, ckptDir string, n, servers int) {
	t.Helper()
	m := ckpt.Manifest{Format: ckpt.ManifestFormat, N: n, Epoch: n, NextEpoch: n, Servers: servers, Partitioner: "consistent", Created: time.Now()}
	for r := range servers {
		data := []byte(fmt.Sprintf("server %d", r))
		writeFile(t, filepath.Join(ckpt.Path(ckptDir, n), ckpt.ServerFileName(r)), data)
		sum := sha256.Sum256(data)
		m.Files = append(m.Files, ckpt.FileEntry{Name: ckpt.ServerFileName(r), Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
	}
	fsys, name, err := localResolver().Resolve(t.Context(), ckptDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ckpt.Commit(t.Context(), fsys, name, m); err != nil {
		t.Fatal(err)
	}
}

// runToSuccess runs the job of spec on f and fails t unless it
// succeeds.
func runToSuccess(t *testing.T, ctx context.Context, spec JobSpec, opts Options, f *fake) Result {
	t.Helper()
	j, err := New(ctx, spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	f.j = j
	res, err := j.Run(ctx, f)
	if res.State != tracker.Succeeded || err != nil {
		t.Fatalf("job %v: %v", res.State, err)
	}
	return res
}

// TestResumeWithOverwrite: --resume with --overwrite replaces the model
// but resumes from the newest checkpoint, which stays; the status's
// events and the result name it.
func TestResumeWithOverwrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ckptDir, output := filepath.Join(dir, "ckpt"), filepath.Join(dir, "model")
	writeCommittedCheckpoint(t, ckptDir, 3, 1)
	writeFile(t, filepath.Join(output, "part-00000"), []byte("an old model"))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	f := newFake(t, func(f *fake, l Launch) {
		if l.Task == worker0 {
			finish(f, output, server0, worker0, scheduler)
		}
	})
	spec := JobSpec{Command: []string{"prog"}, NumWorkers: 1, NumServers: 1, MaxAttempts: 1, CheckpointDir: ckptDir, Output: output,
		Resume: true, Overwrite: true}
	res := runToSuccess(t, ctx, spec, Options{Log: quietLog()}, f)
	uri := "file://" + ckpt.Path(ckptDir, 3)
	if got := envOf(f.launchesOf(server0)[0], conf.EnvResumeFrom); got != uri {
		t.Errorf("server 0 resumes from %q, want %q", got, uri)
	}
	if _, err := os.Stat(filepath.Join(ckpt.Path(ckptDir, 3), ckpt.ManifestName)); err != nil {
		t.Errorf("checkpoint 3 after the job: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(output, "part-00000")); err != nil || string(b) == "an old model" {
		t.Errorf("the output's part-00000 after the job: %q %v; want the new model's", b, err)
	}
	want := "from checkpoint " + uri + " (epoch 3)"
	if res.ResumedFrom != uri || !slices.ContainsFunc(res.Status.Events, func(e tracker.Event) bool {
		return e.Kind == tracker.EventResumed && e.Detail == want
	}) {
		t.Errorf("resumed from %q, events %+v; want %q and an event %q", res.ResumedFrom, res.Status.Events, uri, want)
	}
}

// TestRerunResumesTheScaledServers: a later attempt of the AM resumes a
// job that scaled in from its checkpoint, with the servers that wrote
// it: the spec's other servers are not started.
func TestRerunResumesTheScaledServers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ckptDir, output := filepath.Join(dir, "ckpt"), filepath.Join(dir, "model")
	writeCommittedCheckpoint(t, ckptDir, 2, 2)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	f := newFake(t, func(f *fake, l Launch) {
		if l.Task == worker0 {
			finish(f, output, server0, server1, worker0, scheduler)
		}
	})
	spec := JobSpec{Command: []string{"prog"}, NumWorkers: 1, NumServers: 3, MaxAttempts: 1, CheckpointDir: ckptDir, Output: output}
	runToSuccess(t, ctx, spec, Options{Log: quietLog(), Rerun: true}, f)
	if n := len(f.launchesOf(server2)); n != 0 {
		t.Errorf("server 2 launched %d times; the checkpoint had 2 servers", n)
	}
	checkJoining(t, f.launchesOf(server1)[0], false, 2, 0)
	if got := envOf(f.launchesOf(server1)[0], conf.EnvResumeFrom); got != "file://"+ckpt.Path(ckptDir, 2) {
		t.Errorf("server 1 resumes from %q", got)
	}
	if n := modelParts(t, output); n != 2 {
		t.Errorf("the model has %d parts, want 2", n)
	}
}

// TestScaleWorkersOut: more workers start the new ranks, told to join
// the target; the job switches once they joined, and each learns the
// epoch it begins at. A worker of the job that fails after the switch
// is replaced as a member, told the job's workers now; the job succeeds
// once every one of them exited 0.
func TestScaleWorkersOut(t *testing.T) {
	t.Parallel()
	_, f, res, err := runScaled(t, JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2}, func(e *scaleEnv) func(f *fake, l Launch) {
		return func(f *fake, l Launch) {
			switch {
			case l.Task == worker0 && l.Seq == 0:
				f.j.State().Plan()
				viewBothOf(f, 0, 1, 1)
				scaleWorkersTo(f, 3)
			case l.Task == worker1:
				joinedEvent(f, l)
			case l.Task == worker2:
				joinedEvent(f, l)
				viewBothOf(f, 1, 1, 3)
				for _, rank := range []int{1, 2} {
					if e, ok := f.j.State().JoinEpoch(rank); !ok || e != 1 {
						f.t.Errorf("worker %d joins at epoch %d (%v), want 1", rank, e, ok)
					}
				}
				w0, _ := f.current(worker0)
				f.exit(w0, 1)
			case l.Task == worker0:
				finish(f, e.output, server0, worker0, worker1, worker2, scheduler)
			}
		}
	}, nil)
	if res.State != tracker.Succeeded || err != nil {
		t.Fatalf("job %v: %v", res.State, err)
	}
	checkWorkerJoining(t, f.launchesOf(server0)[0], false, 1, 1, 0)
	w0 := f.launchesOf(worker0)
	if len(w0) != 2 || res.Restarts != 0 {
		t.Fatalf("worker 0 launched %d times, %d restarts of the job; want twice, none", len(w0), res.Restarts)
	}
	checkWorkerJoining(t, w0[0], false, 1, 1, 0)
	checkWorkerJoining(t, w0[1], false, 3, 1, 1)
	for _, task := range []Task{worker1, worker2} {
		ls := f.launchesOf(task)
		if len(ls) != 1 {
			t.Fatalf("%s launched %d times, want once", task, len(ls))
		}
		checkWorkerJoining(t, ls[0], true, 3, 1, 0)
		if got := envOf(ls[0], conf.EnvWorkerID); got != fmt.Sprint(task.Rank) {
			t.Errorf("%s: %s=%q", task, conf.EnvWorkerID, got)
		}
	}
	if got := rolesOf(res.Status); got != "scheduler 1/1, server 1/1, worker 3/3" {
		t.Errorf("roles %s", got)
	}
	if res.Status.Workers != 3 || res.Status.WorkersTarget != 3 {
		t.Errorf("status workers %d target %d, want 3 and 3", res.Status.Workers, res.Status.WorkersTarget)
	}
	var events []string
	for _, ev := range res.Status.Events {
		if ev.Kind == tracker.EventScale || ev.Kind == tracker.EventScaling {
			events = append(events, ev.Kind+": "+ev.Detail)
		}
	}
	if got := strings.Join(events, "; "); got != "scale: workers: 1 → 3 requested at epoch 0; scaling: workers 1 → 3 from epoch 1" {
		t.Errorf("events %s", got)
	}
}

// TestScaleWorkersInRetiredWorkerLeaves: a worker a switch to fewer
// workers left out exits 0 before the epoch while the others train on;
// that is its end alone, neither a failure nor a restart nor the job's
// end, and the job succeeds once the workers it kept exited 0.
func TestScaleWorkersInRetiredWorkerLeaves(t *testing.T) {
	t.Parallel()
	retired := false
	_, f, res, err := runScaled(t, JobSpec{NumWorkers: 3, NumServers: 1, MaxAttempts: 1}, func(e *scaleEnv) func(f *fake, l Launch) {
		return func(f *fake, l Launch) {
			if l.Task != worker2 {
				return
			}
			f.j.State().Plan()
			viewBothOf(f, 0, 1, 3)
			scaleWorkersTo(f, 2)
			viewBothOf(f, 1, 1, 2)
			if !f.j.State().Retiring(conf.RoleWorker, 2) {
				f.t.Error("worker 2 does not retire")
			}
			f.exit(l, 0)
		}
	}, func(f *fake, e *scaleEnv) {
		if retired || taskStateOf(f, worker2) != "retired" {
			return
		}
		retired = true
		// The job goes on: nothing stopped, no other task ended.
		if f.stopAlls != 0 || len(f.running) != 4 {
			f.t.Errorf("after worker 2 retired: %d StopAll, %d launches running; want none stopped and 4 running", f.stopAlls, len(f.running))
		}
		if got := rolesOf(f.j.State().Status()); got != "scheduler 0/1, server 0/1, worker 0/2" {
			f.t.Errorf("roles once worker 2 retired: %s", got)
		}
		finish(f, e.output, worker0, worker1, server0, scheduler)
	})
	if res.State != tracker.Succeeded || err != nil {
		t.Fatalf("job %v: %v", res.State, err)
	}
	if !retired {
		t.Fatal("worker 2 never showed as retired")
	}
	if n := len(f.launchesOf(worker2)); n != 1 || res.Restarts != 0 {
		t.Errorf("worker 2 launched %d times, %d restarts of the job; want once, none", n, res.Restarts)
	}
	if want := "all 4 tasks exited 0; 1 worker left the job as it scaled, which ended with 2 workers"; !strings.Contains(res.Summary(), want) {
		t.Errorf("summary %q, want it to say %q", res.Summary(), want)
	}
	for _, ev := range res.Status.Events {
		if ev.Kind == tracker.EventExited {
			t.Errorf("event %+v: the retired worker's end is not an exit to report", ev)
		}
	}
}

// TestScaleWorkerJoinerFailsThenWorkersFinish: a worker started to join
// that fails before it joined is started again alone, joining still;
// once every worker of the job's count exited 0 it is stopped, having
// no epoch left to join, and the job succeeds without it.
func TestScaleWorkerJoinerFailsThenWorkersFinish(t *testing.T) {
	t.Parallel()
	_, f, res, err := runScaled(t, JobSpec{NumWorkers: 2, NumServers: 1, MaxAttempts: 2}, func(e *scaleEnv) func(f *fake, l Launch) {
		return func(f *fake, l Launch) {
			switch {
			case l.Task == worker1:
				f.j.State().Plan()
				viewBothOf(f, 0, 1, 2)
				scaleWorkersTo(f, 3)
			case l.Task == worker2 && l.Attempt == 0:
				f.exit(l, 1)
			case l.Task == worker2:
				finish(f, e.output, worker0, worker1)
			}
		}
	}, func(f *fake, e *scaleEnv) {
		if len(f.stopped) == 1 && taskStateOf(f, worker2) == "stopped" && taskStateOf(f, server0) == "running" {
			finish(f, e.output, server0, scheduler)
		}
	})
	if res.State != tracker.Succeeded || err != nil {
		t.Fatalf("job %v: %v", res.State, err)
	}
	ls := f.launchesOf(worker2)
	if len(ls) != 2 {
		t.Fatalf("worker 2 launched %d times, want twice", len(ls))
	}
	checkWorkerJoining(t, ls[1], true, 3, 1, 1)
	if len(f.stopped) != 1 || f.stopped[0].Task != worker2 {
		t.Errorf("stopped %v, want worker 2", f.stopped)
	}
	if want := "all 4 tasks exited 0; 1 worker left the job as it scaled, which ended with 2 workers"; !strings.Contains(res.Summary(), want) {
		t.Errorf("summary %q, want it to say %q", res.Summary(), want)
	}
}

// TestScaleWorkersJoinerNotNeeded: lowering the target before the
// switch stops the worker started to join; the job trains on with the
// workers it has.
func TestScaleWorkersJoinerNotNeeded(t *testing.T) {
	t.Parallel()
	done := false
	_, f, res, err := runScaled(t, JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 1}, func(e *scaleEnv) func(f *fake, l Launch) {
		return func(f *fake, l Launch) {
			switch l.Task {
			case worker0:
				f.j.State().Plan()
				viewBothOf(f, 0, 1, 1)
				scaleWorkersTo(f, 2)
			case worker1:
				scaleWorkersTo(f, 1) // changed one's mind before the switch
			}
		}
	}, func(f *fake, e *scaleEnv) {
		if done || len(f.stopped) == 0 {
			return
		}
		done = true
		viewBothOf(f, 1, 1, 1)
		finish(f, e.output, server0, worker0, scheduler)
	})
	if res.State != tracker.Succeeded || err != nil {
		t.Fatalf("job %v: %v", res.State, err)
	}
	if len(f.stopped) != 1 || f.stopped[0].Task != worker1 {
		t.Errorf("stopped %v, want worker 1", f.stopped)
	}
	if got := taskStateOf(f, worker1); got != "stopped" {
		t.Errorf("worker 1 is %q, want stopped", got)
	}
}

// TestScaleWorkersThenRestartFromCheckpoint: when the whole job starts
// again after a scale-up of its workers, every worker it had starts as
// a member, told the job's workers, and the run's first launch says how
// many it starts with.
func TestScaleWorkersThenRestartFromCheckpoint(t *testing.T) {
	t.Parallel()
	_, f, res, err := runScaled(t, JobSpec{NumWorkers: 1, NumServers: 1, MaxAttempts: 2, CheckpointDir: "ckpt"}, func(e *scaleEnv) func(f *fake, l Launch) {
		return func(f *fake, l Launch) {
			switch {
			case l.Task == worker0 && l.Seq == 0:
				f.j.State().Plan()
				viewBothOf(f, 0, 1, 1)
				scaleWorkersTo(f, 2)
			case l.Task == worker1 && l.Seq == 0:
				joinedEvent(f, l)
				viewBothOf(f, 1, 1, 2)
				commitServersCheckpoint(f, e.ckpt, 1, 1)
				srv, _ := f.current(server0)
				f.exit(srv, 1)
			case l.Task == worker1:
				viewBothOf(f, 1, 1, 2)
				if _, ok := f.j.State().JoinEpoch(1); ok {
					f.t.Error("worker 1, a member of the new run, joins at an epoch")
				}
				finish(f, e.output, server0, worker0, worker1, scheduler)
			}
		}
	}, nil)
	if res.State != tracker.Succeeded || err != nil {
		t.Fatalf("job %v: %v", res.State, err)
	}
	if res.Restarts != 1 {
		t.Errorf("%d restarts of the job, want 1", res.Restarts)
	}
	ls := f.launchesOf(worker1)
	if len(ls) != 2 {
		t.Fatalf("worker 1 launched %d times, want twice", len(ls))
	}
	checkWorkerJoining(t, ls[0], true, 2, 1, 0)
	checkWorkerJoining(t, ls[1], false, 2, 1, 0)
	checkWorkerJoining(t, f.launchesOf(worker0)[1], false, 2, 1, 0)
	checkWorkerJoining(t, f.launchesOf(server0)[1], false, 2, 1, 1)
	// The run's gang, as a cluster may ask for it at once.
	if s := f.launchesOf(scheduler); len(s) != 2 || s[1].Servers != 1 || s[1].Workers != 2 {
		t.Errorf("the second run's scheduler launch %+v, want the run's 1 server and 2 workers", s)
	}
}
