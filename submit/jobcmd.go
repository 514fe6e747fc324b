package submit

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/submit/yarnclient"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

const cmdLogs = "logs"

// followEvery is how often "logs --follow" looks for new output.
const followEvery = time.Second

// localStatusTimeout bounds asking a local job's status page.
const localStatusTimeout = 3 * time.Second

// defaultJobsDir is where local jobs keep their directories unless
// --jobs-dir says otherwise: $HOME/.spindle/jobs.
func defaultJobsDir(lookup func(string) (string, bool)) string {
	if home, ok := lookup("HOME"); ok && home != "" {
		return filepath.Join(home, ".spindle", "jobs")
	}
	return filepath.Join(os.TempDir(), "spindle-jobs")
}

// newLocalJobID names a new local job: "local-20261123-220501-3fa2".
func newLocalJobID(now time.Time) string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return "local-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// keepLocalJobs is how many ended local jobs' directories are kept.
const keepLocalJobs = 50

// pruneLocalJobs removes the directories of ended local jobs under
// jobsDir but the newest keep (by their id's time): those whose status
// file says they ended. A failure is logged; a job still running, or a
// directory it does not recognise, is left alone.
func pruneLocalJobs(jobsDir string, keep int, log *logrus.Entry) {
	ents, err := os.ReadDir(jobsDir)
	if err != nil {
		return
	}
	var ended []string
	for _, e := range ents {
		if !e.IsDir() || !localJobIDRE.MatchString(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(jobsDir, e.Name(), local.StatusFile))
		var st struct {
			State tracker.JobState `json:"state"`
		}
		if err != nil || json.Unmarshal(b, &st) != nil || st.State == tracker.Running || st.State == "" {
			continue
		}
		ended = append(ended, e.Name())
	}
	sort.Strings(ended) // ids sort by their start
	for len(ended) > keep {
		if err := os.RemoveAll(filepath.Join(jobsDir, ended[0])); err != nil {
			log.WithError(err).Warn("old local job's directory not removed")
		}
		ended = ended[1:]
	}
}

// localJobIDRE matches the ids newLocalJobID makes.
var localJobIDRE = regexp.MustCompile(`^local-\d{8}-\d{6}-[0-9a-f]{4}$`)

// jobCommand is "ps-submit status|logs|scale JOB [flags]".
type jobCommand struct {
	cmd     string
	job     string
	task    *job.Task
	follow  bool
	jobsDir string
	help    bool
	login   yarnclient.Login
	// servers and workers are scale's --servers and --workers; -1 when
	// not given.
	servers, workers int
}

// parseJobCommand parses the arguments after the subcommand.
func parseJobCommand(cmd string, args []string) (jobCommand, error) {
	c := jobCommand{cmd: cmd, servers: -1, workers: -1}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		isFlag := strings.HasPrefix(a, "-") && a != "-"
		takeValue := func() (string, error) {
			if hasValue {
				return value, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s: flag --%s needs a value", cmd, name)
			}
			i++
			return args[i], nil
		}
		switch {
		case !isFlag:
			pos = append(pos, a)
		case name == "h" || name == "help":
			c.help = true
			return c, nil
		case name == "jobs-dir":
			v, err := takeValue()
			if err != nil {
				return c, err
			}
			c.jobsDir = v
		case name == "task" && cmd == cmdLogs:
			v, err := takeValue()
			if err != nil {
				return c, err
			}
			t, err := job.ParseTask(v)
			if err != nil {
				return c, fmt.Errorf("%s: --task: %w", cmd, err)
			}
			c.task = &t
		case (name == "follow" || name == "f") && cmd == cmdLogs && !hasValue:
			c.follow = true
		case (name == "servers" || name == "workers") && cmd == cmdScale:
			v, err := takeValue()
			if err != nil {
				return c, err
			}
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return c, fmt.Errorf("%s: --%s %q: want a number of %s", cmd, name, v, name)
			}
			if n < 1 {
				return c, fmt.Errorf("%s: --%s %d: want at least 1", cmd, name, n)
			}
			if name == "servers" {
				c.servers = n
			} else {
				c.workers = n
			}
		case name == "principal" || name == "keytab":
			v, err := takeValue()
			if err != nil {
				return c, err
			}
			if name == "principal" {
				c.login.Principal = v
			} else {
				c.login.Keytab = v
			}
		default:
			return c, fmt.Errorf("%s: unknown flag %s", cmd, a)
		}
	}
	if (c.login.Principal == "") != (c.login.Keytab == "") {
		return c, fmt.Errorf("%s: --principal and --keytab go together", cmd)
	}
	switch len(pos) {
	case 0:
		return c, fmt.Errorf("%s: missing the job: a YARN application id (application_<cluster timestamp>_<number>) or a local job's id or directory", cmd)
	case 1:
		c.job = strings.TrimSpace(pos[0])
	default:
		return c, fmt.Errorf("%s: want one job, got %d: %s", cmd, len(pos), strings.Join(pos, " "))
	}
	if cmd == cmdScale && c.servers < 0 && c.workers < 0 {
		return c, fmt.Errorf("%s: missing --servers N or --workers N, the number of servers or workers the job is to run with", cmd)
	}
	return c, nil
}

// scaleCount is a job's number of servers or workers and, when another
// was asked for (ps-submit scale), that one.
func scaleCount(n, target int) string {
	if target != n {
		return fmt.Sprintf("%d (%d asked for, from an epoch boundary on)", n, target)
	}
	return strconv.Itoa(n)
}

// isYARNJob reports whether a job argument is a YARN application id.
func isYARNJob(s string) bool { return strings.HasPrefix(s, "application_") }

// localJobDir finds a local job's directory: arg itself when it is a
// directory with a job.json, else jobsDir/arg.
func localJobDir(jobsDir, arg string) (string, error) {
	if strings.ContainsRune(arg, os.PathSeparator) {
		if _, err := os.Stat(filepath.Join(arg, local.InfoFile)); err == nil {
			return arg, nil
		}
	}
	dir := filepath.Join(jobsDir, arg)
	if _, err := os.Stat(filepath.Join(dir, local.InfoFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("no local job %s: no %s in %s (a local job's id is printed when it starts; --jobs-dir is where they are kept)", arg, local.InfoFile, dir)
		}
		return "", err
	}
	return dir, nil
}

// localJobStatus returns a local job's status: from its page while it
// runs, else from its status file; live says which.
func localJobStatus(ctx context.Context, dir string) (info local.Info, st *web.Status, live bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, local.InfoFile))
	if err != nil {
		return info, nil, false, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, nil, false, fmt.Errorf("%s: %w", filepath.Join(dir, local.InfoFile), err)
	}
	if info.URL != "" {
		// The page answers for this job only if the names agree (the
		// port may have been reused).
		if s, err := pageStatus(ctx, info.URL, info.Token); err == nil && s.Name == info.Name && !s.Started.Before(info.Started.Add(-time.Second)) {
			return info, s, true, nil
		}
	}
	b, err = os.ReadFile(filepath.Join(dir, local.StatusFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return info, nil, false, nil
		}
		return info, nil, false, err
	}
	var s web.Status
	if err := json.Unmarshal(b, &s); err != nil {
		return info, nil, false, fmt.Errorf("%s: %w", filepath.Join(dir, local.StatusFile), err)
	}
	if s.State == tracker.Running {
		// Its ps-submit is gone (the page does not answer): it did not
		// end well.
		s.State = "ENDED"
		s.Diagnostics = strings.TrimSpace(s.Diagnostics + "\nps-submit ended without recording the job's end (killed?)")
	}
	return info, &s, false, nil
}

// runJobCommand runs "ps-submit status|logs JOB ..." and returns the exit
// status.
func runJobCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	c, err := parseJobCommand(args[0], args[1:])
	if c.help {
		fmt.Fprintf(stdout, appCommandUsage, progName, killTimeout)
		return 0
	}
	if err != nil {
		writeUsageError(stderr, err)
		return 2
	}
	if c.jobsDir == "" {
		c.jobsDir = defaultJobsDir(lookup)
	}
	switch {
	case c.cmd == cmdStatus && isYARNJob(c.job):
		id, err := yarn.ParseApplicationID(c.job)
		if err != nil {
			writeUsageError(stderr, fmt.Errorf("%s: %q is not an application id (want application_<cluster timestamp>_<number>)", c.cmd, c.job))
			return 2
		}
		r, st, stErr, err := yarnclient.JobStatus(ctx, id, lookup, c.login)
		if err != nil {
			writeLines(stderr, progName+": ", appError(id, err).Error())
			return 1
		}
		bw := bufio.NewWriter(stdout)
		_ = writeAppReport(bw, r)
		if st != nil {
			writeJobStatus(bw, st)
		} else if stErr != nil {
			fmt.Fprintf(bw, "\njob status not available: %v\n", strings.ReplaceAll(stErr.Error(), "\n", "; "))
		}
		_ = bw.Flush()
		return 0
	case c.cmd == cmdStatus:
		dir, err := localJobDir(c.jobsDir, c.job)
		if err != nil {
			writeLines(stderr, progName+": ", err.Error())
			return 1
		}
		info, st, live, err := localJobStatus(ctx, dir)
		if err != nil {
			writeLines(stderr, progName+": ", err.Error())
			return 1
		}
		bw := bufio.NewWriter(stdout)
		fmt.Fprintf(bw, "local job %s\n", info.ID)
		fmt.Fprintf(bw, "  %-14s %s\n", "name", info.Name)
		fmt.Fprintf(bw, "  %-14s %s\n", "directory", dir)
		page := info.PageURL()
		if !live {
			page += " (not answering: the job is over)"
		}
		fmt.Fprintf(bw, "  %-14s %s\n", "status page", page)
		fmt.Fprintf(bw, "  %-14s %s\n", "started", info.Started.Format(time.RFC3339))
		if st != nil {
			writeJobStatus(bw, st)
		}
		_ = bw.Flush()
		return 0
	}
	if err := runLogs(ctx, c, stdout, lookup); err != nil {
		writeLines(stderr, progName+": ", err.Error())
		return 1
	}
	return 0
}

// writeJobStatus writes the job's own progress: state, epoch, metrics
// (the newest epochs' too), speeds, tasks and events.
func writeJobStatus(w io.Writer, st *web.Status) {
	item := func(name, value string) { fmt.Fprintf(w, "  %-14s %s\n", name, value) }
	fmt.Fprintf(w, "\njob %s\n", st.Name)
	item("state", string(st.State))
	planned := ""
	if st.EpochsPlanned > 0 && st.Progress != nil {
		planned = fmt.Sprintf("; %d epochs planned, %s done", st.EpochsPlanned, percent(*st.Progress))
	}
	item("epoch", fmt.Sprintf("%d (%d of %d shards done%s)", st.Epoch, st.ShardsDone, st.ShardsTotal, planned))
	if n := len(st.Epochs); n > 0 {
		e := st.Epochs[n-1]
		item("metrics", fmt.Sprintf("epoch %d: %s", e.Epoch, formatMetrics(e.Metrics)))
		// The newest loss and AUC, which may come from an earlier epoch
		// while the workers still report the last one.
		var parts []string
		for _, m := range []struct {
			name string
			get  func(web.EpochPoint) *float64
		}{{"loss", func(e web.EpochPoint) *float64 { return e.Loss }}, {"AUC", func(e web.EpochPoint) *float64 { return e.AUC }}} {
			for i := n - 1; i >= 0; i-- {
				if v := m.get(st.Epochs[i]); v != nil {
					parts = append(parts, fmt.Sprintf("%s %s (epoch %d)", m.name, formatNumber(*v), st.Epochs[i].Epoch))
					break
				}
			}
		}
		if len(parts) > 0 {
			item("loss, AUC", strings.Join(parts, ", "))
		}
	} else {
		item("metrics", "(none yet)")
	}
	writeEpochs(w, st.Epochs)
	var speeds []string
	for _, wr := range st.Speed.Workers {
		rate := "–"
		for i := len(wr.Rates) - 1; i >= 0; i-- {
			if wr.Rates[i] != nil {
				rate = fmt.Sprintf("%.0f/s", math.Round(*wr.Rates[i]))
				break
			}
		}
		speeds = append(speeds, fmt.Sprintf("worker %d %s (%d read)", wr.Rank, rate, wr.Records))
	}
	if len(speeds) == 0 {
		speeds = []string{"(no shard read yet)"}
	}
	item("examples/s", strings.Join(speeds, ", "))
	if st.Servers > 0 {
		item("servers", scaleCount(st.Servers, st.ServersTarget))
	}
	if st.Workers > 0 {
		item("workers", scaleCount(st.Workers, st.WorkersTarget))
	}
	item("failovers", fmt.Sprintf("%d (times the whole job started again)", st.Failovers))
	if st.Diagnostics != "" {
		item("diagnostics", strings.ReplaceAll(strings.TrimSpace(st.Diagnostics), "\n", "\n                 "))
	}
	fmt.Fprintf(w, "  tasks:\n    %-12s %-10s %7s %8s  %-16s %s\n", "TASK", "STATE", "ATTEMPT", "RESTARTS", "NODE", "CONTAINER / LAST EXIT")
	for _, t := range st.Tasks {
		where := t.Container
		if t.Exit != "" {
			if where != "" {
				where += " / "
			}
			exit, _, _ := strings.Cut(t.Exit, "\n") // the rest is YARN's diagnostics
			where += exit
		}
		fmt.Fprintf(w, "    %-12s %-10s %7d %8d  %-16s %s\n", t.Task, t.State, t.Attempt, t.Restarts, t.Node, where)
	}
	writeEvents(w, st.Events)
}

// newest writes the heading of a list of n things, of which status
// prints at most the newest limit, and returns how many it prints.
func newest(w io.Writer, things string, n, limit int) int {
	if n > limit {
		fmt.Fprintf(w, "  %s (the newest %d of %d):\n", things, limit, n)
		return limit
	}
	fmt.Fprintf(w, "  %s:\n", things)
	return n
}

// maxEpochsShown is how many of the newest epochs status prints.
const maxEpochsShown = 10

// writeEpochs prints the newest epochs' metrics, a line each: when its
// last report came, its loss and AUC, and the examples it trained.
func writeEpochs(w io.Writer, epochs []web.EpochPoint) {
	if len(epochs) == 0 {
		return
	}
	epochs = epochs[len(epochs)-newest(w, "epochs", len(epochs), maxEpochsShown):]
	orDash := func(v *float64) string {
		if v == nil {
			return "–"
		}
		return formatNumber(*v)
	}
	fmt.Fprintf(w, "    %-6s %-12s %-8s %-8s %s\n", "EPOCH", "REPORTED", "LOSS", "AUC", "EXAMPLES")
	for _, e := range epochs {
		examples := "–"
		if n, ok := e.Metrics["examples_count"]; ok {
			examples = formatNumber(n)
		}
		fmt.Fprintf(w, "    %-6d %-12s %-8s %-8s %s\n", e.Epoch, e.At.Local().Format("15:04:05.000"), orDash(e.Loss), orDash(e.AUC), examples)
	}
}

// maxEventsShown is how many of the newest events status prints.
const maxEventsShown = 10

// writeEvents prints the newest events: when, which task, what, and how
// long it was down.
func writeEvents(w io.Writer, events []web.Event) {
	if len(events) == 0 {
		return
	}
	events = events[len(events)-newest(w, "events", len(events), maxEventsShown):]
	for _, e := range events {
		task := e.Task
		if task == "" {
			task = "job"
		}
		took := ""
		if e.TookSeconds > 0 {
			took = fmt.Sprintf(" after %.3f s", e.TookSeconds)
		}
		detail := ""
		if e.Detail != "" {
			detail = ": " + e.Detail
		}
		fmt.Fprintf(w, "    %s  %-12s %s%s%s\n", e.At.Local().Format("15:04:05.000"), task, e.Kind, took, detail)
	}
}

// logFile is one output file of one launch of a task.
type logFile struct {
	task   job.Task
	seq    int
	stream string
	where  string
	open   func(ctx context.Context) (io.ReadCloser, error)
}

func (f logFile) name() string { return job.LogName(f.task, f.seq, f.stream) }

// listLogs lists the job's output files and whether the job is over.
func listLogs(ctx context.Context, c jobCommand, lookup func(string) (string, bool)) ([]logFile, bool, error) {
	if isYARNJob(c.job) {
		id, err := yarn.ParseApplicationID(c.job)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %q is not an application id", c.cmd, c.job)
		}
		yf, over, err := yarnclient.Logs(ctx, id, lookup, c.login)
		if err != nil {
			return nil, false, appError(id, err)
		}
		files := make([]logFile, len(yf))
		for i, f := range yf {
			files[i] = logFile{task: f.Task, seq: f.Seq, stream: f.Stream, where: f.Where, open: f.Open}
		}
		return files, over, nil
	}
	dir, err := localJobDir(c.jobsDir, c.job)
	if err != nil {
		return nil, false, err
	}
	_, st, live, err := localJobStatus(ctx, dir)
	if err != nil {
		return nil, false, err
	}
	over := !live || st == nil || st.State != tracker.Running
	ents, err := os.ReadDir(filepath.Join(dir, local.LogsDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	var files []logFile
	for _, e := range ents {
		task, seq, stream, ok := job.ParseLogName(e.Name())
		if !ok {
			continue
		}
		p := filepath.Join(dir, local.LogsDir, e.Name())
		files = append(files, logFile{task: task, seq: seq, stream: stream, where: p,
			open: func(context.Context) (io.ReadCloser, error) { return os.Open(p) }})
	}
	yf := make([]yarnclient.LogFile, len(files))
	for i, f := range files {
		yf[i] = yarnclient.LogFile{Task: f.task, Seq: f.seq, Stream: f.stream, Where: f.where}
	}
	// Sort through yarnclient's order, keeping the open functions.
	idx := make(map[string]logFile, len(files))
	for _, f := range files {
		idx[f.name()] = f
	}
	yarnclient.SortLogFiles(yf)
	for i, f := range yf {
		files[i] = idx[job.LogName(f.Task, f.Seq, f.Stream)]
	}
	return files, over, nil
}

// selectLogs keeps the files of the latest launch of each task, of the
// task asked for if any.
func selectLogs(files []logFile, task *job.Task) []logFile {
	latest := map[job.Task]int{}
	for _, f := range files {
		if s, ok := latest[f.task]; !ok || f.seq > s {
			latest[f.task] = f.seq
		}
	}
	var out []logFile
	for _, f := range files {
		if f.seq == latest[f.task] && (task == nil || *task == f.task) {
			out = append(out, f)
		}
	}
	return out
}

// noLogs is the error of logs when it found nothing to print: of a task
// that has no output, the error names those that have.
func noLogs(c jobCommand, files []logFile, over bool) error {
	what := "any task"
	if c.task != nil {
		what = c.task.String()
	}
	msg := fmt.Sprintf("%s: no output of %s in job %s", c.cmd, what, c.job)
	if !over {
		msg += " yet"
	}
	var have []string
	for _, f := range selectLogs(files, nil) {
		if t := f.task.String(); !slices.Contains(have, t) {
			have = append(have, t)
		}
	}
	if len(have) > 0 {
		msg += "; there is output of " + strings.Join(have, ", ")
	}
	return errors.New(msg)
}

// runLogs prints the output of the job's tasks; with --follow it keeps
// printing what they add until the job is over (or ctx ends). A job, or
// task, that has no output when it is over (at once without --follow) is
// an error.
func runLogs(ctx context.Context, c jobCommand, stdout io.Writer, lookup func(string) (string, bool)) error {
	printed := map[string]int64{}
	lastHeader := ""
	found := false // some output of the task asked for exists
	bw := bufio.NewWriter(stdout)
	defer bw.Flush()
	pass := func() (over bool, err error) {
		files, over, err := listLogs(ctx, c, lookup)
		if err != nil {
			return false, err
		}
		sel := selectLogs(files, c.task)
		found = found || len(sel) > 0
		if !found && (over || !c.follow) {
			return over, noLogs(c, files, over)
		}
		headers := len(sel) > 1 || c.follow
		for _, f := range sel {
			n, err := printNew(ctx, bw, f, printed[f.name()], func() {
				h := fmt.Sprintf("==> %s %s (launch %d, %s) <==", f.task, f.stream, f.seq, f.where)
				if headers && h != lastHeader {
					fmt.Fprintf(bw, "\n%s\n", h)
					lastHeader = h
				}
			})
			printed[f.name()] += n
			if err != nil && !c.follow {
				return over, err
			}
		}
		return over, bw.Flush()
	}
	over, err := pass()
	if err != nil || !c.follow {
		return err
	}
	tick := time.NewTicker(followEvery)
	defer tick.Stop()
	for !over {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if over, err = pass(); err != nil {
			return err
		}
	}
	return nil
}

// printNew writes what f holds past its first skip bytes, calling header
// first when there is something to write, and returns the bytes written.
func printNew(ctx context.Context, w io.Writer, f logFile, skip int64, header func()) (int64, error) {
	rc, err := f.open(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", f.task, f.stream, err)
	}
	defer rc.Close()
	if skip > 0 {
		if s, ok := rc.(io.Seeker); ok {
			if _, err := s.Seek(skip, io.SeekStart); err != nil {
				return 0, err
			}
		} else if _, err := io.CopyN(io.Discard, rc, skip); err != nil {
			if errors.Is(err, io.EOF) {
				return 0, nil
			}
			return 0, err
		}
	}
	buf := make([]byte, 32<<10)
	var n int64
	for {
		m, err := rc.Read(buf)
		if m > 0 {
			if n == 0 {
				header()
			}
			if _, werr := w.Write(buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
