package submit

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/tracker"
)

const (
	// redrawEvery bounds how often the terminal status line is redrawn
	// (about once a second: the tracker reports that often).
	redrawEvery = 900 * time.Millisecond
	// plainEvery bounds how often a plain line is written when only
	// counts changed (processes running or done, shards done), so that
	// logs stay short; a restart, a new epoch or new metrics are written
	// at once.
	plainEvery = 10 * time.Second
	// eraseLine returns to the start of the line and clears it.
	eraseLine = "\r\033[K"
)

// progress shows a job's status: on a terminal as one line redrawn in
// place, otherwise as a line each time something changed. It is safe for
// concurrent use: the launcher calls update while tasks write through
// around.
type progress struct {
	w   io.Writer
	tty bool
	now func() time.Time

	mu      sync.Mutex
	line    string    // tty: the status line on screen; "" if none
	drawnAt time.Time // tty: when line was drawn
	last    string    // plain: the last line written
	lastKey string    // plain: what in last is written at once when it changes
	wroteAt time.Time // plain: when last was written
}

func newProgress(w io.Writer, tty bool, now func() time.Time) *progress {
	return &progress{w: w, tty: tty, now: now}
}

// update shows st if it changed (local.Options.OnStatus).
func (p *progress) update(st tracker.Status) {
	if st.State != "" && st.State != tracker.Running {
		return // the summary follows
	}
	parts := statusParts(st)
	text := strings.Join(parts.all(), " · ")
	if text == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.tty {
		if text == p.line || (!p.drawnAt.IsZero() && now.Sub(p.drawnAt) < redrawEvery) {
			return
		}
		p.line, p.drawnAt = text, now
		_, _ = io.WriteString(p.w, eraseLine+text)
		return
	}
	key := parts.key
	if text == p.last || (p.last != "" && key == p.lastKey && now.Sub(p.wroteAt) < plainEvery) {
		return
	}
	p.last, p.lastKey, p.wroteAt = text, key, now
	_, _ = io.WriteString(p.w, text+"\n")
}

// finish clears the status line, before the summary.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.line != "" {
		_, _ = io.WriteString(p.w, eraseLine)
		p.line = ""
	}
}

// around returns a writer to w, a stream sharing the terminal with the
// status line: each write clears the line first and redraws it after.
// Off a terminal it returns w.
func (p *progress) around(w io.Writer) io.Writer {
	if !p.tty {
		return w
	}
	return &aroundWriter{p: p, w: w}
}

type aroundWriter struct {
	p *progress
	w io.Writer
}

func (a *aroundWriter) Write(b []byte) (int, error) {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	if a.p.line != "" {
		_, _ = io.WriteString(a.p.w, eraseLine)
	}
	n, err := a.w.Write(b)
	if a.p.line != "" {
		_, _ = io.WriteString(a.p.w, a.p.line)
	}
	return n, err
}

// parts are the sections of a status line, and key: whether every
// process is running, the restarts, the epoch and the metrics, whose
// changes are worth a plain line at once.
type parts struct {
	nodes, epoch, shards, metrics string
	key                           string
}

func (s parts) all() []string {
	return nonEmpty(s.nodes, s.epoch, s.shards, s.metrics)
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// statusParts renders st: "workers 2/2 servers 2/2 scheduler 1/1",
// "epoch 1", "shards 3/8", "loss=0.6931 auc=0.7". The epoch and shards
// show only for a job with inputs; the metrics name their epoch when it
// is not the one shown.
func statusParts(st tracker.Status) parts {
	var s parts
	var nodes, key []string
	allUp := true
	for _, r := range sortedRoles(st.Roles) {
		key = append(key, strconv.Itoa(r.Restarts))
		allUp = allUp && r.Running == r.Want
		n := fmt.Sprintf("%s %d/%d", plural(r.Role), r.Running, r.Want)
		var notes []string
		if r.Succeeded > 0 {
			notes = append(notes, fmt.Sprintf("%d done", r.Succeeded))
		}
		if r.Restarts > 0 {
			notes = append(notes, count(r.Restarts, "restart"))
		}
		if len(notes) > 0 {
			n += " (" + strings.Join(notes, ", ") + ")"
		}
		nodes = append(nodes, n)
	}
	s.nodes = strings.Join(nodes, " ")
	showEpoch := st.ShardsTotal > 0
	if showEpoch {
		s.epoch = "epoch " + strconv.Itoa(st.Epoch)
		s.shards = fmt.Sprintf("shards %d/%d", st.ShardsDone, st.ShardsTotal)
		if p, ok := st.Progress(); ok && st.State != tracker.Succeeded {
			s.shards += " · " + percent(p)
		}
	}
	if m := formatMetrics(st.Metrics); m != "" {
		if !showEpoch || st.MetricsEpoch != st.Epoch {
			m += fmt.Sprintf(" (epoch %d)", st.MetricsEpoch)
		}
		s.metrics = m
	}
	s.key = strings.Join(append(key, strconv.FormatBool(allUp), s.epoch, s.metrics), "|")
	return s
}

// roleRank orders roles as the status line shows them.
var roleRank = map[conf.Role]int{conf.RoleWorker: 0, conf.RoleServer: 1, conf.RoleScheduler: 2}

func sortedRoles(rs []tracker.RoleStatus) []tracker.RoleStatus {
	out := append([]tracker.RoleStatus(nil), rs...)
	sort.SliceStable(out, func(i, j int) bool { return rankOf(out[i].Role) < rankOf(out[j].Role) })
	return out
}

func rankOf(role conf.Role) int {
	if r, ok := roleRank[role]; ok {
		return r
	}
	return len(roleRank)
}

// plural names a role's processes: workers, servers; there is one
// scheduler.
func plural(role conf.Role) string {
	if role == conf.RoleScheduler {
		return string(role)
	}
	return string(role) + "s"
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// formatMetrics renders metrics compactly: loss (loss_sum/examples_count),
// auc (test_auc) and logloss (test_logloss) first, then the others by
// name, byte counts (bytes_*_sum) in binary units without the suffix.
func formatMetrics(m map[string]float64) string {
	if len(m) == 0 {
		return ""
	}
	used := map[string]bool{}
	var out []string
	sum, okSum := m["loss_sum"]
	n, okN := m["examples_count"]
	if okSum && okN && n > 0 {
		out = append(out, "loss="+formatNumber(sum/n))
		used["loss_sum"], used["examples_count"] = true, true
	}
	for _, kv := range [][2]string{{"auc", "test_auc"}, {"logloss", "test_logloss"}} {
		if v, ok := m[kv[1]]; ok {
			out = append(out, kv[0]+"="+formatNumber(v))
			used[kv[1]] = true
		}
	}
	var rest []string
	for k := range m {
		if !used[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		if name, ok := strings.CutSuffix(k, "_sum"); ok && strings.HasPrefix(k, "bytes_") {
			out = append(out, name+"="+formatBytes(m[k]))
			continue
		}
		out = append(out, k+"="+formatNumber(m[k]))
	}
	return strings.Join(out, " ")
}

// formatNumber writes whole numbers in full and others with 4 significant
// digits (one decimal from 1000 on).
func formatNumber(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case math.Abs(v) >= 1000:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}

// formatBytes writes a byte count in B, KiB, MiB or GiB, with 3
// significant digits from KiB on.
func formatBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return formatNumber(v) + units[0]
	}
	return strconv.FormatFloat(v, 'g', 3, 64) + units[i]
}

// summaryRoles orders roles in the summary.
var summaryRoles = map[conf.Role]int{conf.RoleScheduler: 0, conf.RoleServer: 1, conf.RoleWorker: 2}

// writeSummary writes how the job ended: its state and wall time, each
// task's exit code by role (and attempts when a task ran more than once),
// where the model is, the checkpoint the job started from, and the last
// metrics.
func writeSummary(w io.Writer, name string, res job.Result) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "job %s %s after %s\n", name, res.State, formatWall(res.Wall))

	tasks := append([]job.TaskResult(nil), res.Tasks...)
	sort.SliceStable(tasks, func(i, j int) bool {
		ri, rj := roleOrder(tasks[i].Role), roleOrder(tasks[j].Role)
		if ri != rj {
			return ri < rj
		}
		if tasks[i].Role != tasks[j].Role {
			return tasks[i].Role < tasks[j].Role
		}
		return tasks[i].Rank < tasks[j].Rank
	})
	var groups []string
	for i := 0; i < len(tasks); {
		j := i
		var codes, attempts []string
		retried := false
		for ; j < len(tasks) && tasks[j].Role == tasks[i].Role; j++ {
			codes = append(codes, exitText(tasks[j], res.State == tracker.Succeeded))
			attempts = append(attempts, strconv.Itoa(tasks[j].Attempts))
			retried = retried || tasks[j].Attempts > 1
		}
		g := plural(tasks[i].Role) + " " + strings.Join(codes, " ")
		if retried {
			g += " (attempts " + strings.Join(attempts, " ") + ")"
		}
		groups = append(groups, g)
		i = j
	}
	if len(groups) > 0 {
		fmt.Fprintf(bw, "  exit codes  %s\n", strings.Join(groups, " · "))
	}
	for _, role := range []conf.Role{conf.RoleServer, conf.RoleWorker} {
		if line := scaledLine(res, role); line != "" {
			fmt.Fprintf(bw, "  %-11s %s\n", plural(role), line)
		}
	}
	if res.Output != "" {
		fmt.Fprintf(bw, "  model       %s\n", res.Output)
	}
	switch from := res.ResumedFrom; {
	case res.Restarts > 0:
		if from == "" {
			from = "the start"
		}
		fmt.Fprintf(bw, "  restarts    %d (the whole job started again), the last from %s\n", res.Restarts, from)
	case from != "":
		fmt.Fprintf(bw, "  resumed     from %s\n", from)
	}
	if m := formatMetrics(res.Status.Metrics); m != "" {
		fmt.Fprintf(bw, "  metrics     %s (epoch %d)\n", m, res.Status.MetricsEpoch)
	}
	if share, ok := res.Status.NodeLocalShare(); ok {
		fmt.Fprintf(bw, "  locality    %d of %d shards read on a host that stores them (%.0f%%)\n", res.Status.LocalGiven, res.Status.LocatedGiven, 100*share)
	}
	return bw.Flush()
}

// scaledLine says, for a job whose servers or workers (role) changed,
// how many it ended with and which of them left it; "" for a job whose
// tasks of role did not change.
func scaledLine(res job.Result, role conf.Role) string {
	var left []string
	for _, t := range res.Tasks {
		if t.Retired && t.Role == role {
			left = append(left, fmt.Sprintf("%s %d", t.Role, t.Rank))
		}
	}
	// The tracker's switches say "servers 2 → 3 from epoch 4".
	scaled := slices.ContainsFunc(res.Status.Events, func(e tracker.Event) bool {
		return e.Kind == tracker.EventScaling && strings.HasPrefix(e.Detail, plural(role)+" ")
	})
	if !scaled && len(left) == 0 {
		return ""
	}
	end := res.Status.Servers
	if role == conf.RoleWorker {
		end = res.Status.Workers
	}
	line := fmt.Sprintf("%d at the end, as the job scaled", end)
	if len(left) > 0 {
		line += "; " + strings.Join(left, ", ") + " left it (exit codes above)"
	}
	return line
}

func roleOrder(role conf.Role) int {
	if r, ok := summaryRoles[role]; ok {
		return r
	}
	return len(summaryRoles)
}

// exitText is a task's exit code, "killed" for a process ended by a
// signal ("stopped" in a job that succeeded, where only the launcher
// ends one so), or "unstarted" when its last attempt never ran (one
// word, as the codes of a role's tasks are listed by rank,
// space-separated).
func exitText(t job.TaskResult, succeeded bool) string {
	switch {
	case t.NotStarted:
		return "unstarted"
	case t.ExitCode < 0 && succeeded:
		// Only a task no longer needed ends so in a job that succeeded:
		// the launcher stopped it (job.Result.Summary says which).
		return "stopped"
	case t.ExitCode < 0:
		return "killed"
	}
	return strconv.Itoa(t.ExitCode)
}

// formatWall rounds a wall time for people: 850ms, 12.3s, 4m5s.
func formatWall(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// percent writes a share of 0 to 1 as a whole percentage, rounded down.
func percent(p float64) string { return strconv.Itoa(int(100*p)) + "%" }
