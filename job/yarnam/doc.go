// Package yarnam runs a job's tasks in YARN containers, from inside the
// job's ApplicationMaster: a job.Cluster, and the ApplicationMaster's
// lifecycle around it.
//
// Run prepares the job and serves its tracker (job.New, advertised on the
// AM's host), serves the status page (package job/web, each task's
// output read from its NodeManager's web services), registers with the ResourceManager with that page as
// the tracking URL, runs the job's supervisor (job.Job.Run) on a Cluster,
// and always stops every container and unregisters with the job's final
// status and a diagnostic; except when a signal stops an attempt that is
// not the application's last (Options.MoreAttempts), which leaves the
// application to YARN's next attempt.
//
// The Cluster's allocate loop runs in its own goroutine: it asks for one
// container per launch (the scheduler at priority 0, servers at 1, workers
// at 2), starts the command in each container that comes with the
// launch's environment (DMLC_NODE_HOST the IP address of the container's
// node, which ps-lite binds with ZeroMQ), and reports each container's
// end. A task that failed on a node is kept off it when the cluster has
// others (a container there is released and asked for again, a few times
// at most). A launch that waits longer than AllocationTimeout, or a
// failed heartbeat, fails the job.
//
// Operating on a shared cluster (gang.go, nodes.go, plan.go):
//
//   - Gang start: the scheduler's launch also asks for every server's and
//     worker's container, which are held until their launches come; the
//     tasks' registration timeout is RegisterTimeout(AllocationTimeout),
//     so no task gives up on the others while the AM still allocates.
//   - Locality: the workers' asks name the hosts and racks that store the
//     input (SetInputPlaces, from the shards' hosts), relaxing to any node.
//   - Bad nodes: BlacklistNode (job.NodeBlacklister) adds a node to the
//     application's blacklist in the next allocate call; containers YARN
//     took away (preempted, lost with their node or disks, killed by the
//     ResourceManager) end as job.Exit.Lost, which keeps the task's
//     attempts.
//   - PlanLaunches describes every task's container without a cluster,
//     for ps-submit --dry-run.
//
// When Options.LogDir is set, the standard output and error of every
// container that ended are copied from its NodeManager into that
// directory (job.LogName) before the AM unregisters, while the
// NodeManagers still serve them: that is where they are read once the
// application is over, with or without YARN's log aggregation.
package yarnam
