package yarnam

import (
	"slices"
	"sort"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/yarn"
)

// TaskLaunch is how the ApplicationMaster would start one task's first
// attempt: for a dry run.
type TaskLaunch struct {
	Task     job.Task
	Priority int32
	Resource yarn.Resource
	// Commands are the container's command words, as the NodeManager's
	// launch script runs them.
	Commands []string
	// Env is the container's environment as KEY=VALUE, sorted, the job
	// secret redacted and what is chosen at run time shown as
	// placeholders (<node>, <scheduler-node>, <scheduler-port>,
	// <am-host>:<tracker-port>).
	Env []string
	// Resources are the link names of the local resources localized into
	// the container (Options.Resources), sorted.
	Resources []string
}

// PlanLaunches returns the launch of every task of spec as Run with opts
// would ask for it, without a cluster.
func PlanLaunches(spec job.JobSpec, opts Options) ([]TaskLaunch, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	c := job.Contract{Spec: spec, Cluster: "yarn", Secret: job.Redacted, RootHost: "<scheduler-node>", RootPort: -1,
		TrackerAddr: "<am-host>:<tracker-port>"}
	base := append([]string{registerTimeoutEnv(opts.AllocationTimeout)}, opts.Env...)
	var res []string
	for k := range opts.Resources {
		res = append(res, k)
	}
	sort.Strings(res)
	var out []TaskLaunch
	for _, t := range job.Tasks(spec) {
		prio := prioWorker
		switch t.Role {
		case conf.RoleScheduler:
			prio = prioScheduler
		case conf.RoleServer:
			prio = prioServer
		}
		m := envMap(c.Env(t, 0, "<node>", base))
		if _, ok := m[conf.EnvRootPort]; ok {
			m[conf.EnvRootPort] = "<scheduler-port>"
		}
		env := make([]string, 0, len(m))
		for k, v := range m {
			env = append(env, k+"="+v)
		}
		sort.Strings(env)
		out = append(out, TaskLaunch{Task: t, Priority: prio, Resource: taskResource(spec, prio),
			Commands: containerCommand(spec.Command), Env: env, Resources: slices.Clone(res)})
	}
	return out, nil
}

// containerCommand is the command words of a task's container: the
// command, quoted for the launch script, its output to the container's
// log directory.
func containerCommand(cmd []string) []string {
	return append(shellWords(cmd), "1><LOG_DIR>/stdout", "2><LOG_DIR>/stderr")
}
