package submit

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// aliases maps each short flag onto the flag it stands for.
var aliases = map[string]string{
	"n": "num-workers",
	"s": "num-servers",
	"h": "help",
}

// canonicalFlag returns the long name of a flag given by either name.
func canonicalFlag(name string) string {
	if long, ok := aliases[name]; ok {
		return long
	}
	return name
}

// helpGroups orders the flags in the help. Every flag of flagSet is in
// exactly one group (a test checks it).
var helpGroups = []struct {
	title string
	flags []string
}{
	{"Job", []string{"cluster", "num-workers", "num-servers", "replicas", "jobname", "max-attempts", "stall-timeout", "log-level"}},
	{"Data", []string{"input", "split-size", "output", "overwrite", "checkpoint-dir", "checkpoint-interval", "checkpoint-keep", "resume"}},
	{"Environment of the tasks", []string{"env", "server-env", "worker-env", "files", "archives"}},
	{"Resources (YARN)", []string{"worker-cores", "worker-memory", "server-cores", "server-memory", "queue"}},
	{"Application (YARN)", []string{"am-memory", "am-cores", "max-app-attempts", "priority", "tags", "allocation-timeout", "blacklist-after"}},
	{"Kerberos (YARN)", []string{"principal", "keytab"}},
	{"Other", []string{"detach", "jobs-dir", "cpu-bind", "dry-run", "insecure", "help"}},
}

// examples close the help text.
const examples = `Examples:
  # Logistic regression on this machine: 2 workers, 2 servers.
  ps-submit --cluster local -n 2 -s 2 --input data/train.libsvm --output /tmp/model -- ./ps-lr

  # The same on a YARN cluster, reading and writing HDFS.
  ps-submit --cluster yarn --num-workers 50 --num-servers 10 --worker-memory 4g --queue ml \
    --input 'hdfs:///logs/2026-11-*/*.libsvm' --output hdfs:///models/ctr -- ./ps-lr --epochs 5

  # Dense data-parallel training with collectives: no servers, 4 workers.
  ps-submit --cluster local -n 4 -s 0 --input data/train.csv --output /tmp/dense -- ./ps-dense --mode zero

  # An existing ps-lite (C++) program, unchanged, with connection logs.
  DMLC_SUBMIT_CLUSTER=local ps-submit -n 4 -s 2 --env PS_VERBOSE=1 ./test_kv_app 1000

  # Submit to YARN without waiting; then follow or stop it.
  ps-submit --cluster yarn --detach -n 4 -s 2 -- ./ps-lr
  ps-submit status application_1700000000000_0001
  ps-submit logs application_1700000000000_0001 --task worker:0 --follow
  ps-submit kill application_1700000000000_0001

  # What would run, without running it: locally, or on YARN (containers,
  # their launch contexts and the files that would be staged).
  ps-submit --dry-run -n 2 -s 1 -- ./ps-lr
  ps-submit --dry-run --cluster yarn -n 2 -s 1 --archives dict.tar.gz -- ./ps-lr
`

// flagSet defines every flag on o's fields. The current values of the
// fields are the defaults, so NewOptions's values show in the help.
func (o *Options) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(progName, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by Main, in one line
	fs.Usage = func() {}

	fs.StringVar(&o.Cluster, "cluster", o.Cluster, "run the job on `local|yarn`: this machine or a YARN cluster (default $"+envSubmitCluster+", else local)")
	o.intVar(fs, &o.NumWorkers, "num-workers", "`N` worker processes, at least 1 (required)")
	o.intVar(fs, &o.NumServers, "num-servers", "`N` server processes, and a scheduler; 0 (given) for a job without servers whose workers still meet at the scheduler, for collectives (ps-dense); not given: plain workers, without a scheduler")
	o.intVar(fs, &o.Replicas, "replicas", "`K` other servers keep a copy of each server's tables, so that a server that dies is started again alone and restores them, without rolling the job back to a checkpoint; 0 turns it off (default 1 with two servers or more)")
	fs.StringVar(&o.JobName, "jobname", o.JobName, "job `NAME` (default spindle:<base name of the command>)")
	o.intVar(fs, &o.MaxAttempts, "max-attempts", "run each task at most `N` times in all, the first attempt included (one that exits 65, its input or arguments at fault, is not started again)")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level of ps-submit and of the tasks, one of `debug|info|warn|error` in any case")

	fs.Var((*listValue)(&o.Inputs), "input", "training data: a `PATH` or glob, local or hdfs://; repeatable")
	fs.StringVar(&o.SplitSize, "split-size", o.SplitSize, "target shard `SIZE`: 512k, 64m, 1g, or a number of bytes")
	fs.StringVar(&o.Output, "output", o.Output, "`PATH` where the servers write the model; no model if empty")
	fs.BoolVar(&o.Overwrite, "overwrite", o.Overwrite, "replace an existing non-empty --output (and clear --checkpoint-dir, unless --resume) instead of refusing to start; a complete model there stays until the new one is complete")
	fs.StringVar(&o.CheckpointDir, "checkpoint-dir", o.CheckpointDir, "`PATH` where the servers write checkpoints")
	o.intVar(fs, &o.CheckpointKeep, "checkpoint-keep", "keep the newest `N` committed checkpoints")
	fs.BoolVar(&o.Resume, "resume", o.Resume, "continue from the newest committed checkpoint in --checkpoint-dir")
	fs.StringVar(&o.CheckpointInterval, "checkpoint-interval", o.CheckpointInterval, "checkpoint every `N|DURATION`: N epochs (2) or a duration (10m, 1h)")

	fs.Var((*listValue)(&o.Env), "env", "set `KEY=VALUE` in the environment of every task; repeatable")
	fs.Var((*listValue)(&o.ServerEnv), "server-env", "set `KEY=VALUE` for the servers and the scheduler only; repeatable")
	fs.Var((*listValue)(&o.WorkerEnv), "worker-env", "set `KEY=VALUE` for the workers only; repeatable")
	fs.Var((*listValue)(&o.Files), "files", "a local `FILE` the command finds by its name in its working directory (shipped on YARN, linked there locally); repeatable")
	fs.Var((*listValue)(&o.Archives), "archives", "a local `ARCHIVE[#NAME]` (.tar.gz, .tgz or .zip) unpacked into the directory NAME (default: its base name without the extension) of the tasks' working directory; repeatable")

	o.intVar(fs, &o.WorkerCores, "worker-cores", "`N` cores per worker")
	fs.StringVar(&o.WorkerMemory, "worker-memory", o.WorkerMemory, "`SIZE` of each worker's memory: 512m, 2g, or a number of MB")
	o.intVar(fs, &o.ServerCores, "server-cores", "`N` cores per server")
	fs.StringVar(&o.ServerMemory, "server-memory", o.ServerMemory, "`SIZE` of each server's memory: 512m, 2g, or a number of MB")
	fs.StringVar(&o.Queue, "queue", o.Queue, "YARN `QUEUE` to submit to")

	fs.StringVar(&o.AMMemory, "am-memory", o.AMMemory, "`SIZE` of the ApplicationMaster's memory: 512m, 1g, or a number of MB")
	o.intVar(fs, &o.AMCores, "am-cores", "`N` cores for the ApplicationMaster")
	o.intVar(fs, &o.MaxAppAttempts, "max-app-attempts", "let YARN start the ApplicationMaster at most `N` times; a new attempt starts every task again, from the newest checkpoint when there is one")
	o.intVar(fs, &o.Priority, "priority", "YARN application priority `N` (higher runs first, where the scheduler uses priorities)")
	fs.StringVar(&o.Tags, "tags", o.Tags, "YARN application tags `TAG[,TAG...]`, at most 10 of at most 100 ASCII characters")
	fs.StringVar(&o.StallTimeout, "stall-timeout", o.StallTimeout, "stop a server or worker that holds up the others this long while alive (a barrier or a synchronous step waits for it: its program may be hung) and start it again, as a failure; `DURATION` such as 10m or 1h, 0 to wait for ever")
	fs.StringVar(&o.AllocationTimeout, "allocation-timeout", o.AllocationTimeout, "fail the job when a task waits longer than `DURATION` for a container (30s, 10m); the tasks wait this long plus 2m for each other to start")
	o.intVar(fs, &o.BlacklistAfter, "blacklist-after", "after `N` failed launches on one node, add it to the application's YARN blacklist (0: never); preempted or lost containers do not count")

	fs.StringVar(&o.Principal, "principal", o.Principal, "on a Kerberos-secured cluster, log in as `USER@REALM` from --keytab instead of the ticket cache kinit leaves ($KRB5CCNAME)")
	fs.StringVar(&o.Keytab, "keytab", o.Keytab, "the keytab `FILE` of --principal; on YARN it is shipped to the ApplicationMaster, which obtains new delegation tokens for jobs that outlive theirs (7 days)")

	fs.BoolVar(&o.Detach, "detach", o.Detach, "with --cluster yarn: print the application's id and exit once it is submitted; follow it with '"+progName+" status'")
	fs.StringVar(&o.JobsDir, "jobs-dir", o.JobsDir, "with --cluster local: keep the job's directory (each task's output, its status) under `DIR` (default $HOME/.spindle/jobs)")
	fs.StringVar(&o.CPUBind, "cpu-bind", o.CPUBind, "with --cluster local: bind each server and worker to one CPU, server and worker of one rank to the same: `auto` (when each CPU gets as many servers as the others, and workers, at least one of each), cores (always) or none")
	fs.BoolVar(&o.DryRun, "dry-run", o.DryRun, "print the resolved job and the tasks it would start, then exit; with --cluster yarn also the application, every container's resources, command, environment and local resources, and the files that would be staged, with nothing submitted or staged")
	fs.BoolVar(&o.Insecure, "insecure", o.Insecure, "turn off ZeroMQ CURVE between the nodes: plain, unauthenticated node traffic, for benchmarking only")
	fs.BoolVar(&o.Help, "help", o.Help, "print this help and exit")

	for short, long := range aliases {
		f := fs.Lookup(long)
		fs.Var(f.Value, short, "alias of --"+long)
	}
	return fs
}

// intVar defines an integer flag whose bad values are kept for Validate
// instead of stopping the parse, so that they are reported with the rest.
func (o *Options) intVar(fs *flag.FlagSet, p *int, name, usage string) {
	fs.Var(&intValue{p: p, name: name, o: o}, name, usage)
}

type intValue struct {
	p    *int
	name string
	o    *Options
}

func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		v.o.badInts[v.name] = fmt.Errorf("--%s %q: not a whole number", v.name, s)
		return nil
	}
	delete(v.o.badInts, v.name) // the last value given counts
	*v.p = n
	return nil
}

func (v *intValue) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

// listValue is a repeatable flag.
type listValue []string

func (v *listValue) Set(s string) error { *v = append(*v, s); return nil }
func (v *listValue) String() string {
	if v == nil {
		return ""
	}
	return strings.Join(*v, ",")
}

// dmlcOnly are dmlc-submit flags ps-submit does not have, with what to do
// instead where there is something.
var dmlcOnly = map[string]string{
	"local-num-attempt":    "use --max-attempts (attempts per task, the first included)",
	"log-file":             "redirect the standard error instead",
	"host-ip":              "",
	"host-file":            "",
	"hdfs-tempdir":         "",
	"sge-log-dir":          "",
	"auto-file-cache":      "give the files with --files",
	"archives":             "",
	"yarn-app-classpath":   "",
	"yarn-app-dir":         "",
	"mesos-master":         "",
	"ship-libcxx":          "give the library with --files",
	"sync-dst-dir":         "",
	"slurm-worker-nodes":   "",
	"slurm-server-nodes":   "",
	"kube-namespace":       "",
	"kube-worker-image":    "",
	"kube-server-image":    "",
	"kube-worker-template": "",
	"kube-server-template": "",
}

// flagError rewords the flag package's parse errors, naming flags as they
// are documented (--name).
func flagError(err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		if hint, ok := dmlcOnly[name]; ok {
			if hint == "" {
				return fmt.Errorf("--%s: dmlc-submit's flag is not supported by %s", name, progName)
			}
			return fmt.Errorf("--%s: dmlc-submit's flag is not supported by %s; %s", name, progName, hint)
		}
		return fmt.Errorf("unknown flag %s (put the command's own flags after --)", dashed(name))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Errorf("%s needs a value", dashed(canonicalFlag(name)))
	}
	return errors.New(msg)
}

// dashed spells a flag name as the help does: -n, --num-workers.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// writeHelp writes the help, generated from the flag definitions.
func writeHelp(w io.Writer) error {
	fs := NewOptions(Streams{}, nil, nil).flagSet()
	short := map[string]string{}
	for s, l := range aliases {
		short[l] = s
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `Usage: %[1]s [flags] [--] command [arg...]
       %[1]s status JOB
       %[1]s logs JOB [--task ROLE:RANK] [--follow]
       %[1]s kill JOB
       %[1]s scale JOB [--servers N] [--workers N]

%[1]s runs command as a parameter-server job: a scheduler, --num-servers
servers and --num-workers workers, on this machine (--cluster local) or on
a YARN cluster (--cluster yarn). Every task gets the ps-lite environment
(DMLC_ROLE, DMLC_NUM_WORKER, DMLC_PS_ROOT_URI, ...), so ps-lite programs
run unchanged. With -s 0 the job has no servers, but its workers still
meet at the scheduler (collectives); without -s the command runs as
plain workers, with no scheduler. Flags take one dash or two; the command
follows -- or starts at the first argument that is not a flag.

'%[1]s status JOB' prints a job's progress and metrics (epoch, loss and
AUC by epoch, examples/s, tasks and attempts) and, on YARN, the
application's report; '%[1]s logs JOB' prints the output of its tasks
(--task worker:0 for one, --follow to keep printing); JOB is a YARN
application id or the id of a local job, printed when it starts with the
address of its status page.
'%[1]s kill JOB' stops a job (a YARN application or a local job) and
waits until it ended. '%[1]s scale JOB --servers N --workers N' asks a running
synchronous job to change its number of servers or workers (or both) at
an epoch boundary. '%[1]s status --help' says more. They find the Hadoop
configuration as --cluster yarn does ($HADOOP_CONF_DIR, ...).

Exit status: 0 if the job succeeded, 1 if it failed, 2 on a usage error.
`, progName)
	for _, g := range helpGroups {
		fmt.Fprintf(bw, "\n%s:\n", g.title)
		for _, name := range g.flags {
			f := fs.Lookup(name)
			if f == nil {
				panic("submit: help names flag --" + name + " that flagSet does not define")
			}
			names := "--" + name
			if s, ok := short[name]; ok {
				names = "-" + s + ", " + names
			}
			arg, usage := flag.UnquoteUsage(f)
			if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); isBool {
				arg = ""
			} else if arg == "value" || arg == "string" || arg == "int" {
				arg = "VALUE"
			}
			if arg != "" {
				names += " " + arg
			}
			fmt.Fprintf(bw, "  %s\n        %s", names, usage)
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
				def := f.DefValue
				if fmt.Sprintf("%T", f.Value) == "*flag.stringValue" {
					def = strconv.Quote(def)
				}
				fmt.Fprintf(bw, " (default %s)", def)
			}
			bw.WriteString("\n")
		}
	}
	fmt.Fprintf(bw, "\n%s", examples)
	return bw.Flush()
}
