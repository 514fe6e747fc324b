package submit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/submit/yarnclient"
	"github.com/spindle-ps/spindle/yarn"
)

// Subcommands of ps-submit about a YARN application already submitted.
const (
	cmdStatus = "status"
	cmdKill   = "kill"
	cmdScale  = "scale"
)

// killTimeout bounds how long "ps-submit kill" waits for YARN to report
// the application ended.
const killTimeout = time.Minute

// isAppCommand reports whether args start with a subcommand; a job's
// command of the same name is given after --.
func isAppCommand(args []string) bool {
	return len(args) > 0 && (args[0] == cmdStatus || args[0] == cmdKill || args[0] == cmdLogs || args[0] == cmdScale)
}

// parseAppCommand parses "kill APPLICATION_ID [--principal P --keytab
// F]" (args without the subcommand), cmd naming it in errors. help is true for -h or
// --help.
func parseAppCommand(cmd string, args []string) (id yarn.ApplicationID, login yarnclient.Login, help bool, err error) {
	var ids []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case a == "-h" || a == "-help" || a == "--help":
			return id, login, true, nil
		case strings.HasPrefix(a, "-") && (name == "principal" || name == "keytab"):
			if !hasValue {
				if i+1 >= len(args) {
					return id, login, false, fmt.Errorf("%s: flag --%s needs a value", cmd, name)
				}
				i++
				value = args[i]
			}
			if name == "principal" {
				login.Principal = value
			} else {
				login.Keytab = value
			}
		case strings.HasPrefix(a, "-") && a != "-":
			return id, login, false, fmt.Errorf("%s: unknown flag %s", cmd, a)
		default:
			ids = append(ids, a)
		}
	}
	if (login.Principal == "") != (login.Keytab == "") {
		return id, login, false, fmt.Errorf("%s: --principal and --keytab go together", cmd)
	}
	switch len(ids) {
	case 0:
		return id, login, false, fmt.Errorf("%s: missing the application id (application_<cluster timestamp>_<number>)", cmd)
	case 1:
	default:
		return id, login, false, fmt.Errorf("%s: want one application id, got %d: %s", cmd, len(ids), strings.Join(ids, " "))
	}
	id, err = yarn.ParseApplicationID(strings.TrimSpace(ids[0]))
	if err != nil {
		return id, login, false, fmt.Errorf("%s: %q is not an application id (want application_<cluster timestamp>_<number>)", cmd, ids[0])
	}
	return id, login, false, nil
}

// appCommandUsage is the help of the subcommands.
const appCommandUsage = `Usage: %[1]s status JOB [--jobs-dir DIR] [--principal USER@REALM --keytab FILE]
       %[1]s logs JOB [--task ROLE:RANK] [--follow] [--jobs-dir DIR] [--principal USER@REALM --keytab FILE]
       %[1]s kill JOB [--jobs-dir DIR] [--principal USER@REALM --keytab FILE]
       %[1]s scale JOB [--servers N] [--workers N] [--jobs-dir DIR] [--principal USER@REALM --keytab FILE]

JOB is a YARN application id (application_<cluster timestamp>_<number>)
or a local job's id (local-<date>-<time>-<hex>, printed when it starts)
or directory; scale also takes the status page's address it printed.

status prints the job's own progress: state, epoch and shards, the last
epoch's metrics (loss, AUC), the newest epochs' loss, AUC and examples a
line each, each worker's examples per second, and every task's state,
attempt, restarts, node, container and last exit; for a
YARN application first the ResourceManager's report (state, final status,
progress, tracking URL, diagnostics). It reads the job's status page
while the job runs, and what the job kept once it is over.

logs prints the standard output and error of the latest launch of every
task, or of one (--task worker:0, server:1, scheduler); --follow (-f)
keeps printing what they add until the job ends. On YARN the output is
read from the NodeManagers' web services while the application runs and,
once it is over, from hdfs:///user/<user>/.spindle/logs/<application id>/,
where the ApplicationMaster copies every container's output when it ends
(no yarn command, no JVM needed). A local job keeps it in its directory's
logs/ (--jobs-dir, default $HOME/.spindle/jobs/<id>/logs).

kill asks a job to stop its tasks and end KILLED, keeping their output
and its status: a YARN job through its tracker (as scale does), a local
job through its status page. It waits (up to %[2]v) until the job
ended; a YARN application that has not ended within half of that, or
whose job cannot be asked, it kills through the ResourceManager. It then
removes a YARN application's staging directory. The ps-submit that runs
the job prints its summary and exits 1.

scale asks a running synchronous job to change its number of servers
(--servers, 1 to 64), of workers (--workers, 1 to 256) or both, at an
epoch boundary: the launcher starts the new servers and workers at once,
and the job switches to them at the first epoch boundary after every new
one is ready (the servers and the workers each on their own); the
workers move the keys to the new servers, and the servers and workers
no longer needed hand their keys off or finish their epoch, and end.
The job's program must support it (its tables synchronous, with the
consistent partitioner); a job whose workers have not started training
yet, or never ask, refuses. A local job is asked through its status page
(with the page's token, from the job's directory or the address), a
YARN job through its tracker in the ApplicationMaster, with the job's
keys from its staging directory, which only its user may read.

The Hadoop configuration is found as with --cluster yarn
($HADOOP_CONF_DIR, ...). On a Kerberos-secured cluster they log in from
the ticket cache kinit leaves, or from --keytab as --principal. Exit status: 0 on success, 1 if the job is
unknown or the request failed, 2 on a usage error.
`

// runYARNKill runs "ps-submit kill APPLICATION_ID ..." and returns the
// exit status.
func runYARNKill(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	id, login, help, err := parseAppCommand(args[0], args[1:])
	if help {
		fmt.Fprintf(stdout, appCommandUsage, progName, killTimeout)
		return 0
	}
	if err != nil {
		writeUsageError(stderr, err)
		return 2
	}
	kctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	r, already, err := yarnclient.Kill(kctx, id, lookup, login, 0)
	switch {
	case err != nil && errors.Is(err, yarn.ErrApplicationNotFound):
		writeLines(stderr, progName+": ", appError(id, err).Error())
		return 1
	case already:
		fmt.Fprintf(stdout, "%s: application %s had already ended: %s\n", progName, id, appState(r))
	case r.State.Terminal():
		fmt.Fprintf(stdout, "%s: application %s %s\n", progName, id, appState(r))
	}
	if err != nil {
		writeLines(stderr, progName+": ", err.Error())
		return 1
	}
	return 0
}

// appError words an unknown application clearly.
func appError(id yarn.ApplicationID, err error) error {
	if errors.Is(err, yarn.ErrApplicationNotFound) {
		return fmt.Errorf("application %s not found by the ResourceManager", id)
	}
	return err
}

// writeAppReport writes what "ps-submit status" shows of r.
func writeAppReport(w io.Writer, r yarn.ApplicationReport) error {
	bw := bufio.NewWriter(w)
	item := func(name, value string) {
		if value == "" {
			value = "(none)"
		}
		fmt.Fprintf(bw, "  %-14s %s\n", name, value)
	}
	fmt.Fprintf(bw, "application %s\n", r.ID)
	item("name", r.Name)
	item("user", r.User)
	item("queue", r.Queue)
	item("state", r.State.String())
	item("final status", r.FinalStatus.String())
	item("progress", percent(float64(r.Progress)))
	item("tracking URL", r.TrackingURL)
	if !r.StartTime.IsZero() {
		item("started", r.StartTime.Format(time.RFC3339))
	}
	if !r.FinishTime.IsZero() {
		item("finished", r.FinishTime.Format(time.RFC3339))
	}
	item("diagnostics", strings.TrimSpace(r.Diagnostics))
	return bw.Flush()
}
