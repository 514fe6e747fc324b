// Package local runs a job's tasks as child processes of this one: a
// job.Cluster for ps-submit --cluster local.
//
// Run is the whole local launcher: job.New serves the tracker on
// 127.0.0.1, and the job's supervisor (job.Job.Run, with the restart
// rules) drives a Cluster. Each child runs in its own process group, so
// that stopping it stops what it started, and dies with the launcher
// (PR_SET_PDEATHSIG). Its output goes to Options.Stdout, each line
// prefixed with its role and rank ("[worker 1] ", "[worker 1#1] " for its
// second attempt), and its last lines are kept for the error of a task
// that fails. Stopping sends SIGTERM to every group (and SIGCONT, so
// that a stopped process gets it), then SIGKILL after StopGrace.
//
// When a psnode job's servers and workers divide evenly among the CPUs
// the launcher may use, each server and worker is bound to one CPU,
// server r and worker r to the same (Options.CPUBind, CPUBind); the
// scheduler is not. The nodes talk over Unix sockets in a directory of
// the job's, mode 0700, removed when Run returns (DMLC_LOCAL=1,
// SPINDLE_IPC_DIR), unless a task's environment or the job sets
// DMLC_LOCAL.
//
//	res, err := local.Run(ctx, spec, local.Options{Environ: os.Environ(), Stdout: os.Stdout})
//
// Run also serves the job's status page (package job/web) on 127.0.0.1,
// its "POST /scale" too (ps-submit scale; the page's token guards both),
// and, with Options.Dir, keeps the job's directory: each launch's
// standard output and error in logs/ (job.LogName), the page's address in
// job.json and the job's status in status.json, rewritten as it goes and
// at the end, which "ps-submit status" and "ps-submit logs" read.
//
// Plan lists the processes Run would start, for --dry-run.
package local
