package job

import (
	"cmp"
	"sort"
	"strconv"
	"strings"

	"github.com/spindle-ps/spindle/conf"
)

// Contract is the environment contract of one run of a job: what every
// task of the run is told (DMLC_*, PS_*, SPINDLE_*; see package conf).
type Contract struct {
	Spec JobSpec
	// Cluster is DMLC_JOB_CLUSTER: "local" or "yarn".
	Cluster string
	// Secret is the job secret. It reaches the tasks in the keys file,
	// never in the environment, unless KeysFile is empty (then
	// SPINDLE_JOB_SECRET).
	Secret string
	// KeysFile is the path of the job's keys file as the tasks see it
	// (SPINDLE_JOB_KEYS; see conf.JobKeys).
	KeysFile string
	// TrackerAddr is the tracker RPC's host:port.
	TrackerAddr string
	// RootHost and RootPort locate the scheduler (DMLC_PS_ROOT_URI,
	// DMLC_PS_ROOT_PORT); RootHost is ignored for the scheduler itself,
	// which is told its own node.
	RootHost string
	RootPort int
	// Output is the directory the tasks write the model to
	// (SPINDLE_OUTPUT): Spec.Output, or beside it the directory of a
	// model that is to replace a complete one; empty means Spec.Output.
	Output string
	// ResumeFrom and ResumeEpoch say where the run starts (a committed
	// checkpoint; empty and 0 from scratch).
	ResumeFrom  string
	ResumeEpoch int
	// Run counts the times the whole job started again before this run
	// (conf.Job.Run; tracker.State.EndRun).
	Run int
	// Servers and Workers are the numbers of servers and workers the
	// tasks are told (DMLC_NUM_SERVER, DMLC_NUM_WORKER): the job's as of
	// the launch, which scaling changes (tracker.State.Servers,
	// tracker.State.Workers); 0 means Spec.NumServers, Spec.NumWorkers.
	Servers, Workers int
	// Joining marks the launch of a server or a worker that joins the
	// running job beyond its servers or workers (SPINDLE_JOINING=1,
	// conf.PS.Joining); Servers or Workers is then the number it joins.
	Joining bool
}

// servers is the number of servers c tells the tasks.
func (c Contract) servers() int {
	if c.Servers > 0 {
		return c.Servers
	}
	return c.Spec.NumServers
}

// workers is the number of workers c tells the tasks.
func (c Contract) workers() int {
	if c.Workers > 0 {
		return c.Workers
	}
	return c.Spec.NumWorkers
}

// Env is the environment of attempt of t placed on node: base, the
// job's settings (Env, then ServerEnv or WorkerEnv), then the contract,
// which wins.
func (c Contract) Env(t Task, attempt int, node string, base []string) []string {
	spec := c.Spec
	env := append([]string(nil), base...)
	env = append(env, spec.Env...)
	if t.Role == conf.RoleWorker {
		env = append(env, spec.WorkerEnv...)
	} else {
		env = append(env, spec.ServerEnv...)
	}
	if strings.EqualFold(spec.LogLevel, "debug") && !HasKey(env, conf.EnvVerbose) {
		env = append(env, conf.EnvVerbose+"=1")
	}
	if !spec.HasScheduler() {
		// No parameter servers: plain workers, without a scheduler.
		env = append(env,
			conf.EnvRole+"="+string(conf.RoleWorker),
			conf.EnvNumWorker+"="+strconv.Itoa(c.workers()),
			conf.EnvNumServer+"=0",
			conf.EnvTaskID+"="+strconv.Itoa(t.Rank),
			conf.EnvWorkerID+"="+strconv.Itoa(t.Rank),
			conf.EnvNumAttempt+"="+strconv.Itoa(attempt),
			conf.EnvJobCluster+"="+c.Cluster,
			conf.EnvNodeHost+"="+node,
		)
		if c.KeysFile != "" {
			env = append(env, conf.EnvJobKeys+"="+c.KeysFile)
		} else {
			env = append(env, conf.EnvJobSecret+"="+c.Secret)
		}
		if spec.Insecure {
			env = append(env, conf.EnvInsecure+"=1")
		}
		if c.Joining {
			env = append(env, conf.EnvJoining+"=1")
		}
	} else {
		p := conf.Default().PS
		p.Role = t.Role
		p.NumWorkers, p.NumServers = c.workers(), c.servers()
		p.Joining = c.Joining && t.Role != conf.RoleScheduler
		p.RootURI, p.RootPort = c.RootHost, c.RootPort
		if t.Role == conf.RoleScheduler {
			p.RootURI = node
		}
		p.NodeHost = node
		if t.Role != conf.RoleScheduler {
			p.TaskID = t.Rank
		}
		p.NumAttempt = attempt
		p.Replicas = spec.Replicas
		p.JobCluster = c.Cluster
		p.JobSecret, p.JobKeys, p.Insecure = c.Secret, c.KeysFile, spec.Insecure
		p.StallTimeout = spec.StallLimit()
		env = append(env, p.Environ()...)
	}
	job := conf.Job{
		Name:               spec.Name,
		TrackerAddr:        c.TrackerAddr,
		Output:             cmp.Or(c.Output, spec.Output),
		CheckpointDir:      spec.CheckpointDir,
		CheckpointInterval: spec.CheckpointInterval,
		ResumeFrom:         c.ResumeFrom,
		ResumeEpoch:        c.ResumeEpoch,
		Run:                c.Run,
		TaskMemoryMB:       spec.MemoryMB(t.Role),
	}
	return append(env, job.Environ()...)
}

// HasKey reports whether env, KEY=VALUE strings, sets key.
func HasKey(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}

// Redacted stands for secrets in plans and logs.
const Redacted = "<redacted>"

// PlanKeysFile stands for the keys file's path in plans.
const PlanKeysFile = "<job-keys-file>"

// TaskPlan is one task as a launcher would start it: for --dry-run.
type TaskPlan struct {
	Role    conf.Role
	Rank    int
	Command []string
	// Env holds the settings the launcher adds to the inherited
	// environment, sorted, with the job secret redacted.
	Env []string
	// CPU is the CPU the task is bound to; -1 when it is not.
	CPU int
}

// Plan returns the tasks of spec as the first run would start them on
// cluster, every task placed on node, with placeholders for what is
// chosen at start (the scheduler's port, the tracker's address) and the
// job secret redacted.
func Plan(spec JobSpec, cluster, node string) ([]TaskPlan, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	c := Contract{Spec: spec, Cluster: cluster, Secret: Redacted, KeysFile: PlanKeysFile, RootHost: node, RootPort: -1,
		TrackerAddr: node + ":<tracker-port>"}
	var out []TaskPlan
	for _, t := range Tasks(spec) {
		env := c.Env(t, 0, node, nil)
		for i, kv := range env {
			if strings.HasPrefix(kv, conf.EnvRootPort+"=-1") {
				env[i] = conf.EnvRootPort + "=<scheduler-port>"
			}
		}
		sort.Strings(env)
		out = append(out, TaskPlan{Role: t.Role, Rank: t.Rank, Command: spec.Command, Env: env, CPU: -1})
	}
	return out, nil
}
