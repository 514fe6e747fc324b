// Package job runs a Spindle job: it owns the job from its spec to its
// result, whatever runs the tasks.
//
// A JobSpec says what to run (the command, the numbers of workers and
// servers), what the job reads and writes, and its budgets (MaxAttempts).
// Validate names the fields at fault (FieldError); defaults live in one
// const block (DefaultMaxAttempts, DefaultSplitSize, …).
//
// # Running a job
//
// New checks everything that can be checked before a task starts: the
// spec, the inputs (cut into shards with a tracker.Planner), the output
// and the checkpoint directory, which it prepares (an existing non-empty
// directory is refused unless Overwrite; Resume finds the newest committed
// checkpoint whose files verify). It then serves the tracker RPC for the
// job's tracker.State. Run supervises the tasks on a Cluster until the job
// ends:
//
//	j, err := job.New(ctx, spec, job.Options{Planner: planner, Resolver: resolver})
//	defer j.Close()
//	res, err := j.Run(ctx, cluster) // local.New(…) or yarnam.NewCluster(…)
//
// Run holds the job's only copy of the restart rules: a failed worker is
// started again (its shards go back to the queue) up to MaxAttempts; so
// is a failed server whose tables keep replicas on the other servers,
// and a failed scheduler whose nodes follow it through the tracker (on a
// new port; the tracker tells the nodes where it went); a scheduler that
// ends once every other task exited 0 is no longer needed; any other
// failed scheduler or server, a failed worker of a Collective job (a job
// without servers whose workers meet at a scheduler to run collectives),
// or a task that exits with conf.ExitRestartJob, takes every task back
// to the newest usable checkpoint (from scratch when no worker has asked
// for input yet), or fails the job naming the task when there is no
// checkpoint directory;
// the whole job starts again at most MaxAttempts-1 times; a task that
// exits with conf.ExitBadInput fails the job at once. A kill over the
// tracker RPC or the end of ctx stops every task. The model is committed
// (manifest, then _SUCCESS) only once every task has exited 0 (or, for
// the scheduler, is no longer needed), with a part from every server of
// the last epoch.
//
// # Elastic servers and workers
//
// A synchronous job's servers and workers may change while it runs
// (ps-submit scale, tracker.State.Scale; the tracker decides each
// epoch's servers and workers, tracker.State.View). Run starts a server
// or worker task for every rank a larger target adds, told to join
// (SPINDLE_JOINING=1, DMLC_NUM_SERVER or DMLC_NUM_WORKER the target),
// which is then a task like any other; every other launch is told the
// job's current counts. A server or worker a switch to fewer leaves out
// retires, and its exit is its end alone, not the job's; one started to
// join and no longer needed is stopped (Cluster.Stop). The job's workers
// are done when every worker of the current count exited 0. A
// checkpoint records the servers that wrote it, and a whole restart
// starts again with them and with the workers the job had.
//
// # Clusters
//
// A Cluster starts launches (one attempt of one task, with the
// environment Contract builds once the cluster has placed it on a node),
// stops them all, and reports Placed and Exited events. The scheduler
// starts first; the others once it is placed, told its node
// (DMLC_PS_ROOT_URI). Package job/local runs launches as child processes,
// package job/yarnam as YARN containers. Run calls a Cluster from one
// goroutine; a cluster pushes its events through an EventQueue so that it
// never blocks.
package job
