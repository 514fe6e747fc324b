package job

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/psnode"
)

// TestContractEnv checks the environment each task gets: the scheduler
// told its own node as the root, the others the scheduler's; the base,
// then the job's settings, then the contract, which wins.
func TestContractEnv(t *testing.T) {
	t.Parallel()
	spec := JobSpec{Command: []string{"x"}, NumWorkers: 2, NumServers: 1, MaxAttempts: 1, Name: "j",
		Env: []string{"A=job", "DMLC_ROLE=bad"}, WorkerEnv: []string{"W=1"}, ServerEnv: []string{"S=1"}}
	c := Contract{Spec: spec, Cluster: "yarn", Secret: "s3", TrackerAddr: "am-host:999", RootHost: "10.0.0.9", RootPort: 23456,
		ResumeFrom: "hdfs:///ck/4", ResumeEpoch: 4}
	plain := spec
	plain.NumServers = 0
	coll := plain
	coll.Collective = true
	insecure := spec
	insecure.Insecure = true
	busy := spec
	busy.Env = []string{conf.EnvBusyPoll + "=1"}
	sized := spec
	sized.WorkerMemoryMB, sized.ServerMemoryMB = 4096, 2048
	tests := []struct {
		name    string
		c       Contract
		task    Task
		attempt int
		node    string
		want    map[string]string
	}{
		{"scheduler", c, Task{Role: conf.RoleScheduler}, 0, "10.1.1.1", map[string]string{
			conf.EnvRole: "scheduler", conf.EnvRootURI: "10.1.1.1", conf.EnvRootPort: "23456", conf.EnvNodeHost: "10.1.1.1",
			conf.EnvJobCluster: "yarn", conf.EnvJobSecret: "s3", conf.EnvTrackerAddr: "am-host:999", "A": "job", "S": "1",
			"BASE": "am", conf.EnvTaskID: "", "W": "", conf.EnvResumeFrom: "hdfs:///ck/4", conf.EnvResumeEpoch: "4",
			conf.EnvBusyPoll: ""}},
		{"worker retry", c, Task{Role: conf.RoleWorker, Rank: 1}, 2, "10.1.2.3", map[string]string{
			conf.EnvRole: "worker", conf.EnvRootURI: "10.0.0.9", conf.EnvRootPort: "23456", conf.EnvNodeHost: "10.1.2.3",
			conf.EnvTaskID: "1", conf.EnvWorkerID: "1", conf.EnvNumAttempt: "2", conf.EnvNumWorker: "2", conf.EnvNumServer: "1",
			"W": "1", "S": "", conf.EnvTaskMemoryMB: "1024"}},
		{"sized worker", Contract{Spec: sized, Cluster: "yarn", Secret: "s8"}, Task{Role: conf.RoleWorker}, 0, "10.1.2.3", map[string]string{
			conf.EnvTaskMemoryMB: "4096"}},
		{"sized server", Contract{Spec: sized, Cluster: "local", Secret: "s8"}, Task{Role: conf.RoleServer}, 0, "127.0.0.1", map[string]string{
			conf.EnvTaskMemoryMB: "2048"}},
		{"plain worker", Contract{Spec: plain, Cluster: "local", Secret: "s4"}, Task{Role: conf.RoleWorker}, 1, "127.0.0.1", map[string]string{
			conf.EnvRole: "worker", conf.EnvNumServer: "0", conf.EnvTaskID: "0", conf.EnvNumAttempt: "1", conf.EnvJobCluster: "local",
			conf.EnvJobSecret: "s4", conf.EnvNodeHost: "127.0.0.1", conf.EnvRootURI: ""}},
		{"collective worker", Contract{Spec: coll, Cluster: "yarn", Secret: "s5", RootHost: "10.0.0.7", RootPort: 4242},
			Task{Role: conf.RoleWorker, Rank: 1}, 0, "10.1.2.4", map[string]string{
				conf.EnvRole: "worker", conf.EnvNumServer: "0", conf.EnvNumWorker: "2", conf.EnvTaskID: "1",
				conf.EnvRootURI: "10.0.0.7", conf.EnvRootPort: "4242", conf.EnvJobSecret: "s5"}},
		{"collective scheduler", Contract{Spec: coll, Cluster: "yarn", Secret: "s5", RootPort: 4242},
			Task{Role: conf.RoleScheduler}, 0, "10.1.1.2", map[string]string{
				conf.EnvRole: "scheduler", conf.EnvNumServer: "0", conf.EnvRootURI: "10.1.1.2", conf.EnvRootPort: "4242"}},
		{"keys file", Contract{Spec: insecure, Cluster: "local", Secret: "s5", KeysFile: "/k/f"}, Task{Role: conf.RoleServer}, 0, "127.0.0.1", map[string]string{
			conf.EnvJobKeys: "/k/f", conf.EnvJobSecret: "", conf.EnvInsecure: "1", conf.EnvBusyPoll: ""}},
		{"busy polling asked for", Contract{Spec: busy, Cluster: "local", Secret: "s7"}, Task{Role: conf.RoleWorker}, 0, "127.0.0.1", map[string]string{
			conf.EnvBusyPoll: "1"}},
		{"plain worker keys file", Contract{Spec: plain, Cluster: "local", Secret: "s6", KeysFile: "f"}, Task{Role: conf.RoleWorker}, 0, "127.0.0.1", map[string]string{
			conf.EnvJobKeys: "f", conf.EnvJobSecret: "", conf.EnvInsecure: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for _, kv := range tt.c.Env(tt.task, tt.attempt, tt.node, []string{"BASE=am", "A=base"}) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v // the last setting wins, as in a process's environment
			}
			for k, v := range tt.want {
				if got := env[k]; got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestPlanRedactsTheSecret checks the dry run's tasks.
func TestPlanRedactsTheSecret(t *testing.T) {
	t.Parallel()
	plan, err := Plan(JobSpec{Command: []string{"x"}, NumWorkers: 1, NumServers: 1, MaxAttempts: 1}, "local", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 3 || plan[0].Role != conf.RoleScheduler || plan[2].Role != conf.RoleWorker {
		t.Fatalf("plan %+v", plan)
	}
	for _, p := range plan {
		env := strings.Join(p.Env, "\n")
		for _, want := range []string{conf.EnvJobKeys + "=" + PlanKeysFile, conf.EnvRootPort + "=<scheduler-port>"} {
			if !strings.Contains(env, want) {
				t.Errorf("%s %d: env lacks %s:\n%s", p.Role, p.Rank, want, env)
			}
		}
		if strings.Contains(env, conf.EnvJobSecret) {
			t.Errorf("%s %d: env has %s:\n%s", p.Role, p.Rank, conf.EnvJobSecret, env)
		}
	}
}

// TestValidateNamesFields checks that every problem is reported, by
// field name.
func TestValidateNamesFields(t *testing.T) {
	t.Parallel()
	err := JobSpec{NumServers: -1, Env: []string{"novalue"}, SplitSize: -1}.Validate()
	for _, want := range []string{"Command", "NumWorkers 0: need at least 1", "NumServers -1", "MaxAttempts 0", "SplitSize -1", `Env "novalue": want KEY=VALUE`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want it to say %q", err, want)
		}
	}
	if err := (JobSpec{Command: []string{"x"}, NumWorkers: 1, MaxAttempts: 1}).Validate(); err != nil {
		t.Errorf("a valid spec: %v", err)
	}
	err = JobSpec{Command: []string{"x"}, NumWorkers: MaxWorkers + 1, NumServers: MaxServers + 1, MaxAttempts: 1}.Validate()
	for _, want := range []string{fmt.Sprintf("NumWorkers %d: at most %d", MaxWorkers+1, MaxWorkers), fmt.Sprintf("NumServers %d: at most %d", MaxServers+1, MaxServers)} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want it to say %q", err, want)
		}
	}
	if MaxWorkers != psnode.MaxWorkers || MaxServers != psnode.MaxServers {
		t.Errorf("a job of at most %d workers and %d servers; psnode's have at most %d and %d", MaxWorkers, MaxServers, psnode.MaxWorkers, psnode.MaxServers)
	}
	err = JobSpec{Command: []string{"x"}, NumWorkers: 1, NumServers: 2, Collective: true, MaxAttempts: 1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "Collective: only for a job without servers") {
		t.Errorf("a collective job with servers: %v", err)
	}
}
