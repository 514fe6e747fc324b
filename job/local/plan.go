package local

import (
	"sort"
	"strings"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/job"
)

// launcherEnv is what the launcher adds to environ, the inherited
// environment, for a task: DMLC_LOCAL=1 and SPINDLE_IPC_DIR with an ipc
// directory, GOMAXPROCS=2 for a task bound to a CPU; each unless environ
// sets it (DMLC_LOCAL for both ipc settings). The job's own settings come
// after it and win.
func launcherEnv(environ []string, ipcDir string, bound bool) []string {
	var out []string
	if ipcDir != "" && !job.HasKey(environ, conf.EnvLocal) {
		out = append(out, conf.EnvLocal+"=1", conf.EnvIPCDir+"="+ipcDir)
	}
	if bound && !job.HasKey(environ, "GOMAXPROCS") {
		out = append(out, "GOMAXPROCS="+bindGOMAXPROCS)
	}
	return out
}

// PlanIPCDir stands for the job's ipc directory in plans.
const PlanIPCDir = "<ipc-dir>"

// Plan returns the processes Run(ctx, spec, opts) would start, with
// placeholders for what is chosen at start (ports, the tracker's address,
// the ipc directory) and the job secret redacted. Of opts, only Environ
// and CPUBind count: a task's plan has what the launcher adds to Environ
// (unless the job's settings override it) and the CPU it is bound to.
func Plan(spec job.JobSpec, opts Options) ([]job.TaskPlan, error) {
	plan, err := job.Plan(spec, clusterName, Node)
	if err != nil {
		return nil, err
	}
	cpus, err := jobCPUs(spec, opts.CPUBind)
	if err != nil {
		return nil, err
	}
	ipcDir := ""
	if ipcDirFits() {
		ipcDir = PlanIPCDir
	}
	for i := range plan {
		p := &plan[i]
		cpu, bound := cpuOf(cpus, job.Task{Role: p.Role, Rank: p.Rank})
		if bound {
			p.CPU = cpu
		}
		for _, kv := range launcherEnv(opts.Environ, ipcDir, bound) {
			if k, _, _ := strings.Cut(kv, "="); !job.HasKey(p.Env, k) {
				p.Env = append(p.Env, kv)
			}
		}
		sort.Strings(p.Env)
	}
	return plan, nil
}
