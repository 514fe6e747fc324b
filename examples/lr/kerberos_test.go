package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/internal/syncbuf"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/submit/yarnclient"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

// The Kerberos tests run against scripts/minicluster.sh start --kerberos:
// HDFS and YARN that accept only Kerberos (and the delegation tokens
// issued under it), and DataNodes that authenticate block transfers. The
// test user is the cluster's alice, logged in through the ticket cache
// its env exports.

// TestKerberosYARNTrain: the synchronous 2×2 LR job trains on the secured
// cluster from HDFS to HDFS exactly as on a plain one. ps-submit logs in
// from the ticket cache and talks Kerberos to the ResourceManager and the
// NameNode; the ApplicationMaster and the tasks, which have no Kerberos
// credentials, reach HDFS with the delegation tokens ps-submit obtained.
// The model is the one the same job writes on this machine, and so is the
// model of the job run with the local launcher from and to the secured
// HDFS, whose tasks log in from the ticket cache.
func TestKerberosYARNTrain(t *testing.T) {
	c := hadooptest.ConnectKerberos(t)
	here := runJob(t, 2, 2, 2<<20, "--epochs", "2")
	dir := uploadData(t, c)
	spec := lrSpec(dir, "model")
	spec.Command = []string{psLR, "--epochs", "2", "--test", "hdfs://" + dir + "/test.libsvm"}
	spec.MaxAttempts = 1
	r := runYARN(t, spec, nil)
	if r.err != nil || r.res.State != tracker.Succeeded {
		t.Fatalf("YARN job on the Kerberos cluster: %v %v\nAM log:\n%s", r.res.State, r.err, amLog(t, r.app))
	}
	if got, want := readModel(t, c, spec.Output), localModel(t, here); got != want {
		t.Errorf("the model trained on the Kerberos cluster differs from the local run's (%d and %d lines)", strings.Count(got, "\n"), strings.Count(want, "\n"))
	}
	checkEveryRecordOnce(t, manifest(t, c, spec.Output), 2)
	if got := r.res.Status.Metrics["test_auc"]; got < here.auc-0.002 || got > here.auc+0.002 {
		t.Errorf("test AUC on the Kerberos cluster %.4f, local %.4f", got, here.auc)
	}
	// ps-submit status logs in from the ticket cache, or from a keytab
	// without one.
	for _, args := range [][]string{
		{"status", r.app.String()},
		{"status", r.app.String(), "--principal", os.Getenv("SPINDLE_MINICLUSTER_PRINCIPAL"), "--keytab", os.Getenv("SPINDLE_MINICLUSTER_KEYTAB")},
	} {
		sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(sctx, psSubmit(t), args...)
		if len(args) > 2 {
			cmd.Env = append(os.Environ(), "KRB5CCNAME=FILE:"+t.TempDir()+"/no-cache")
		}
		out, err := cmd.CombinedOutput()
		scancel()
		if err != nil || !strings.Contains(string(out), "FINISHED") || !strings.Contains(string(out), "state          SUCCEEDED") {
			t.Errorf("ps-submit %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// The same job with the local launcher: its tasks, processes of this
	// machine, reach the secured HDFS from the ticket cache.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out syncbuf.Buffer
	localSpec := lrSpec(dir, "model-local")
	localSpec.Command, localSpec.MaxAttempts = spec.Command, 1
	res, err := local.Run(ctx, localSpec, local.Options{Environ: os.Environ(), Stdout: &out, Log: quietLog(),
		Planner: tracker.InputPlanner(c.Resolver), Resolver: c.Resolver})
	if err != nil || res.State != tracker.Succeeded {
		t.Fatalf("local job on the Kerberos cluster's HDFS: %v %v\n%s", res.State, err, out.String())
	}
	if got, want := readModel(t, c, localSpec.Output), localModel(t, here); got != want {
		t.Errorf("the model the local launcher wrote to the Kerberos cluster differs from the local run's")
	}
	// Hadoop's own client reads it, as alice.
	if cat, ok := hadooptest.HadoopShell(t, "-cat", dir+"/model-local/part-00000"); ok && !strings.HasPrefix(localModel(t, here), string(cat)) {
		t.Errorf("hdfs dfs -cat of part-00000 (%d bytes) is not the model's start", len(cat))
	}
}

// TestKerberosRefusals: ps-submit without a usable Kerberos login fails
// before it submits anything, and says how to log in or which file is
// wrong.
func TestKerberosRefusals(t *testing.T) {
	c := hadooptest.ConnectKerberos(t)
	dir := c.TempDir(t)
	bin := psSubmit(t)
	principal := os.Getenv("SPINDLE_MINICLUSTER_PRINCIPAL")
	wrongKeytab := os.Getenv("SPINDLE_MINICLUSTER_WRONG_KEYTAB")
	expired := os.Getenv("SPINDLE_MINICLUSTER_EXPIRED_CCACHE")
	if principal == "" || wrongKeytab == "" {
		t.Fatal("the Kerberos mini cluster's env names no principal or wrong keytab (SPINDLE_MINICLUSTER_PRINCIPAL, SPINDLE_MINICLUSTER_WRONG_KEYTAB)")
	}
	missing := t.TempDir() + "/no-such-ccache"
	cases := []struct {
		name  string
		env   []string
		flags []string
		want  []string // all in stderr
	}{
		{"no ticket", []string{"KRB5CCNAME=FILE:" + missing}, nil, []string{"no ticket cache at " + missing, "kinit", "--principal"}},
		{"wrong keytab", []string{"KRB5CCNAME=FILE:" + missing}, []string{"--principal", principal, "--keytab", wrongKeytab}, []string{"keytab " + wrongKeytab, "wrong or outdated keytab"}},
		{"keytab of someone else", []string{"KRB5CCNAME=FILE:" + missing}, []string{"--principal", "bob@EXAMPLE.COM", "--keytab", wrongKeytab}, []string{"keytab " + wrongKeytab + " holds no key for bob@EXAMPLE.COM"}},
	}
	if expired != "" {
		cases = append(cases, struct {
			name  string
			env   []string
			flags []string
			want  []string
		}{"expired ticket", []string{"KRB5CCNAME=FILE:" + expired}, nil, []string{"expired at", expired, "kinit"}})
	} else {
		t.Log("the cluster made no expired ticket cache: that case is not checked")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out := "hdfs://" + dir + "/" + strings.ReplaceAll(tc.name, " ", "-")
			args := append([]string{"--cluster", "yarn", "-n", "1", "-s", "1", "--input", "hdfs://" + dir + "/none.libsvm", "--output", out}, tc.flags...)
			cmd := exec.CommandContext(ctx, bin, append(args, "--", psLR)...)
			cmd.Env = append(os.Environ(), tc.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("ps-submit did not end within a minute: %s", stderr.String())
			}
			if err == nil {
				t.Fatalf("ps-submit succeeded without a usable login:\n%s", stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr.String())
				}
			}
			if strings.Contains(stderr.String(), "application_") {
				t.Errorf("an application was submitted:\n%s", stderr.String())
			}
		})
	}
}

// longJobEpochs is how many epochs the job of TestKerberosTokenLifetime
// trains: enough to outlive the cluster's tokens and to see the AM
// obtain new ones twice, about 55 s after it starts, on a fast machine
// too. The synchronous 2×2 job trains up to about 190,000 examples a
// second on the 2-core VM of BENCHMARKS.md: 64 epochs of the 200,000
// are some 70 s of training there; at 40 epochs the job once ended a
// second before the second renewal.
const longJobEpochs = 64

// TestKerberosTokenLifetime: on a cluster whose delegation tokens live
// 45 s however often they are renewed (scripts/test.sh's token lifetime
// stage), the synchronous 2×2 job submitted with --principal/--keytab
// outlives the tokens ps-submit obtained. The ApplicationMaster, logged
// in from the shipped keytab, obtains new ones before those expire; the
// running tasks read them, and the worker killed after the first tokens'
// maximum date is started again with the new ones, with which it reads
// its shards from HDFS (with the first tokens it cannot: submitted from
// the ticket cache, the same job fails there). The job writes its model
// as any other. A token obtained before the job's, renewable by the
// test, can no longer be renewed by then.
func TestKerberosTokenLifetime(t *testing.T) {
	c, short := hadooptest.ConnectShortTokens(t)
	t.Logf("the cluster's delegation tokens live %v", short.Lifetime)
	dir := uploadData(t, c)
	spec := lrSpec(dir, "model-long")
	spec.Command = []string{psLR, "--epochs", strconv.Itoa(longJobEpochs)}
	login := yarnclient.Login{Principal: os.Getenv("SPINDLE_MINICLUSTER_PRINCIPAL"), Keytab: os.Getenv("SPINDLE_MINICLUSTER_KEYTAB")}
	var killed []int
	// The job's first tokens were obtained before it was submitted, so
	// before the first status: past submitted+Lifetime, they are past
	// their maximum date.
	var submitted, killedAt time.Time
	r := runYARNAs(t, spec, login, func(app yarn.ApplicationID, st tracker.Status) {
		if submitted.IsZero() {
			submitted = time.Now()
		}
		if killed == nil && time.Since(submitted) > short.Lifetime+2*time.Second &&
			st.Epoch < longJobEpochs-1 && st.ShardsDone >= 1 && st.ShardsDone < st.ShardsTotal-2 {
			killed = hadooptest.KillTask(t, hadooptest.ContainerOf(app.String()), string(conf.RoleWorker), 1)
			killedAt = time.Now()
		}
	})
	took := time.Since(submitted)
	log := amLog(t, r.app)
	if r.err != nil || r.res.State != tracker.Succeeded {
		t.Fatalf("the job past its tokens' lifetime: %v %v\nAM log:\n%s", r.res.State, r.err, log)
	}
	if len(killed) == 0 {
		t.Fatalf("worker 1 was never killed past the first tokens' lifetime: the job took %v, the tokens live %v", took, short.Lifetime)
	}
	t.Logf("the job ran %v; worker 1 was killed %v after it was submitted", took.Round(time.Second), killedAt.Sub(submitted).Round(time.Second))
	checkAttempts(t, r.res.Tasks, map[taskKill]int{{conf.RoleWorker, 1, 0}: 2})
	checkEveryRecordOnce(t, manifest(t, c, spec.Output), longJobEpochs)
	if n := strings.Count(log, "new delegation tokens written for the tasks"); n < 2 {
		t.Errorf("the AM's log says it wrote new tokens %d time(s) in a job of %v, want at least twice (if the job ended before the second time was due, it needs more than %d epochs):\n%s",
			n, took.Round(time.Second), longJobEpochs, log)
	}
	if strings.Contains(log, "could not") {
		t.Errorf("the AM's log has a failure:\n%s", log)
	}
	// The tasks that ran through the first renewal read the new tokens:
	// the scheduler, both servers and both workers' first containers.
	read := 0
	for container, stderr := range hadooptest.ContainerFiles(t, r.app.String(), "stderr") {
		if !strings.HasSuffix(container, "_000001") && strings.Contains(stderr, "newer delegation tokens read") {
			read++
		}
	}
	if read < 5 {
		t.Errorf("%d task containers say they read newer tokens; want the scheduler's, the servers' and both workers' first", read)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.FS.RenewDelegationToken(ctx, short.Token); err == nil {
		t.Errorf("a token obtained before the job was renewed %v after", took.Round(time.Second))
	} else {
		t.Logf("a token obtained before the job: %v", err)
	}
}

// TestKerberosRunningJobCommands: the secured cluster's web servers ask
// for Kerberos (SPNEGO), the ResourceManager's proxy to a job's status
// page among them. ps-submit status reads a running job's status through
// it, logged in from the ticket cache, and ps-submit kill ends the job.
// The job's worker 0 hangs after its first shard, so that the job is
// still running when both are asked.
func TestKerberosRunningJobCommands(t *testing.T) {
	c := hadooptest.ConnectKerberos(t)
	dir := uploadData(t, c)
	spec := lrSpec(dir, "model-hung")
	spec.Command = []string{psLR, "--epochs", "2", "--hang-after", "0:1"}
	spec.MaxAttempts = 1
	bin := psSubmit(t)
	var asked bool
	var unauthenticated int
	var status, kill []byte
	var statusErr, killErr error
	r := runYARN(t, spec, func(app yarn.ApplicationID, st tracker.Status) {
		if asked || st.ShardsDone < 1 {
			return
		}
		asked = true
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// Without a login the proxy refuses.
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+os.Getenv("SPINDLE_MINICLUSTER_RM_WEB")+"/proxy/"+app.String()+"/status.json", nil)
		if err != nil {
			t.Error(err)
			return
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			unauthenticated = resp.StatusCode
			resp.Body.Close()
		}
		status, statusErr = exec.CommandContext(ctx, bin, "status", app.String()).CombinedOutput()
		kill, killErr = exec.CommandContext(ctx, bin, "kill", app.String()).CombinedOutput()
	})
	if !asked {
		t.Fatalf("the job ended (%v: %v) before worker 0 read a shard", r.res.State, r.err)
	}
	if unauthenticated != http.StatusUnauthorized {
		t.Errorf("the proxy answered a request without a login %d; want 401 (is the cluster's web authentication kerberos?)", unauthenticated)
	}
	if statusErr != nil || !strings.Contains(string(status), "\njob model-hung\n  state          RUNNING\n") {
		t.Errorf("ps-submit status of the running job: %v\n%s", statusErr, status)
	}
	if killErr != nil || r.res.State != tracker.Killed {
		t.Errorf("ps-submit kill: %v\n%s\nthe job ended %v: %v", killErr, kill, r.res.State, r.err)
	}
}
