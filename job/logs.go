package job

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spindle-ps/spindle/conf"
)

// Streams are the names of a launch's two outputs, as LogName uses them.
var Streams = []string{"stdout", "stderr"}

// LogName is the file name under which a job keeps the output stream
// ("stdout" or "stderr") of launch seq of task: "worker-0.2.stderr".
// Both clusters use it: the local one in the job's directory, the
// ApplicationMaster in the job's log directory in HDFS.
func LogName(t Task, seq int, stream string) string {
	return fmt.Sprintf("%s-%d.%d.%s", t.Role, t.Rank, seq, stream)
}

// ParseLogName is LogName's inverse; ok is false for any other name.
func ParseLogName(name string) (t Task, seq int, stream string, ok bool) {
	rest, stream, found := strings.Cut(name, ".")
	if !found {
		return t, 0, "", false
	}
	seqStr, stream, found := strings.Cut(stream, ".")
	if !found || (stream != "stdout" && stream != "stderr") {
		return t, 0, "", false
	}
	i := strings.LastIndexByte(rest, '-')
	if i < 0 {
		return t, 0, "", false
	}
	role := conf.Role(rest[:i])
	rank, err1 := strconv.Atoi(rest[i+1:])
	seq, err2 := strconv.Atoi(seqStr)
	if err1 != nil || err2 != nil || rank < 0 || seq < 0 ||
		(role != conf.RoleScheduler && role != conf.RoleServer && role != conf.RoleWorker) {
		return t, 0, "", false
	}
	return Task{Role: role, Rank: rank}, seq, stream, true
}

// ParseTask reads a task as users write it: "worker:0", "worker 0",
// "worker-0", or "scheduler" (rank 0).
func ParseTask(s string) (Task, error) {
	s = strings.TrimSpace(s)
	role, rank := s, "0"
	if i := strings.IndexAny(s, ": -"); i >= 0 {
		role, rank = s[:i], strings.TrimSpace(s[i+1:])
	}
	r := conf.Role(role)
	if r != conf.RoleScheduler && r != conf.RoleServer && r != conf.RoleWorker {
		return Task{}, fmt.Errorf("task %q: the role must be %s, %s or %s", s, conf.RoleScheduler, conf.RoleServer, conf.RoleWorker)
	}
	n, err := strconv.Atoi(rank)
	if err != nil || n < 0 {
		return Task{}, fmt.Errorf("task %q: the rank must be a number from 0", s)
	}
	return Task{Role: r, Rank: n}, nil
}
