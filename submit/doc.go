// Package submit is the command-line front end of Spindle, ps-submit: it
// turns flags into a job.JobSpec, runs the job on this machine
// (job/local) or submits it to YARN (submit/yarnclient), shows its
// progress and sums it up. Main is also the ApplicationMaster's entry
// point ("ps-submit am job.json"), so that cmd/ps-submit imports submit
// alone. The job's errors name JobSpec fields; ps-submit shows them with
// its flags.
//
// The flags keep dmlc-submit's names and defaults (--cluster,
// --num-workers/-n, --num-servers/-s, --worker-memory, --queue, --env,
// --files, …) so that scripts carry over, and fix its quirks: an unknown
// flag is a usage error instead of being appended to the command, and
// --log-level accepts any case.
//
// # Usage
//
// A main package does nothing but call Main with the process's streams,
// environment and a context cancelled on SIGINT and SIGTERM:
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	os.Exit(submit.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv, os.Environ()))
//
// Main runs an Options through its three steps, which callers embedding
// ps-submit may also call themselves:
//
//	o := submit.NewOptions(streams, lookup, environ)
//	err := o.Complete(args) // parse the flags, fill in derived values
//	err = o.Validate()      // every problem at once, each naming its flag
//	err = o.Run(ctx)        // --dry-run, or run the job until it ends
//
// Errors from Complete and Validate are usage errors (exit status 2);
// an error from Run is a failed job or launch (exit status 1).
//
// # Output
//
// The tasks' output, each line prefixed with its role and rank
// ("[worker 0] …"), goes to the standard output. Progress (processes up
// per role, epoch, shards, latest metrics), ps-submit's own log and the
// final summary go to the standard error: as one line redrawn in place
// when it is a terminal, as plain lines written only when something
// changed otherwise.
package submit
