package local

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/job"
)

// A local job's nodes talk over Unix sockets (ZeroMQ's ipc://, ps-lite's
// DMLC_LOCAL=1) in a directory of the job's, mode 0700, rather than over
// TCP on the loopback: a message takes a shorter way through the kernel,
// no TCP port is used, and only the user's own processes can connect at
// all, before CURVE checks them. A task whose environment or job sets
// DMLC_LOCAL (--env DMLC_LOCAL=0 for TCP) keeps what it says.

// maxIPCDir bounds the directory's path: a node's socket path,
// "<dir>/<port>.sealed", must fit the 107 bytes of a Unix socket address.
const maxIPCDir = 107 - len("/65535.sealed")

// ipcDirFits reports whether a directory made by newIPCDir is short
// enough: the temporary directory's path may be too long (TMPDIR).
func ipcDirFits() bool {
	return len(os.TempDir())+len("/spindle-ipc-0123456789") <= maxIPCDir
}

// newIPCDir makes the job's ipc directory. It returns "" (the nodes then
// use TCP) when it would not fit (ipcDirFits).
func newIPCDir(log *logrus.Entry) (string, error) {
	if !ipcDirFits() {
		if log != nil {
			log.WithField("dir", os.TempDir()).Info("the temporary directory's path is too long for Unix sockets: the nodes use TCP")
		}
		return "", nil
	}
	dir, err := os.MkdirTemp("", "spindle-ipc-")
	if err != nil {
		return "", fmt.Errorf("local: a directory for the nodes' sockets: %w", err)
	}
	return dir, nil
}

// removeIPCDir removes the job's ipc directory, once no node runs.
func removeIPCDir(dir string, log *logrus.Entry) {
	if dir == "" {
		return
	}
	if err := os.RemoveAll(dir); err != nil && log != nil {
		log.WithError(err).Warn("could not remove the directory of the nodes' sockets")
	}
}

// launcherEnv is what the launcher adds to environ, the inherited
// environment, for a task: DMLC_LOCAL=1 and SPINDLE_IPC_DIR with an ipc
// directory, GOMAXPROCS=2 for a task bound to a CPU; each unless environ
// sets it (DMLC_LOCAL for both ipc settings). The job's own settings come
// after it and win.
func launcherEnv(environ []string, ipcDir string, bound bool) []string {
	var out []string
	if ipcDir != "" && !hasKey(environ, conf.EnvLocal) {
		out = append(out, conf.EnvLocal+"=1", conf.EnvIPCDir+"="+ipcDir)
	}
	if bound && !hasKey(environ, "GOMAXPROCS") {
		out = append(out, "GOMAXPROCS="+bindGOMAXPROCS)
	}
	return out
}

func hasKey(env []string, key string) bool {
	return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
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
			if k, _, _ := strings.Cut(kv, "="); !hasKey(p.Env, k) {
				p.Env = append(p.Env, kv)
			}
		}
		sort.Strings(p.Env)
	}
	return plan, nil
}
