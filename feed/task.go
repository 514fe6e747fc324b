package feed

import (
	"context"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/tracker"
)

// Task is what the program of a task launched by ps-submit has of its
// job: the configuration, the file systems, the node, and the tracker's
// client (nil when the job has no tracker). StartTask makes them; Close
// ends them.
type Task struct {
	Config  conf.Config
	Files   *dfs.Resolver
	Node    *psnode.Node
	Tracker *tracker.Client
}

// StartTask reads the task's configuration from lookup, reaches the file
// systems (NewResolver), starts the node (StartNode) and, with a tracker
// (SPINDLE_TRACKER_ADDR), makes its client. On error nothing is left
// open.
func StartTask(ctx context.Context, lookup conf.Lookup, environ []string, log *logrus.Entry) (_ *Task, err error) {
	t := &Task{}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if t.Config, err = conf.FromEnv(conf.Default(), lookup); err != nil {
		return nil, err
	}
	if t.Files, err = NewResolver(lookup, log); err != nil {
		return nil, err
	}
	if t.Node, err = StartNode(ctx, lookup, environ, log); err != nil {
		return nil, err
	}
	if t.Config.Job.TrackerAddr != "" {
		if t.Tracker, err = tracker.ConfigClient(t.Config); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Tables makes the task's table set: checkpointed, restored and written
// (in modelFormat) as the job's configuration says (TablesOptions), with
// the tracker, when there is one, committing the checkpoints.
func (t *Task) Tables(modelFormat string) (*psnode.Tables, error) {
	opts, err := TablesOptions(t.Config.Job, t.Files, t.Tracker, modelFormat)
	if err != nil {
		return nil, err
	}
	return psnode.NewTables(t.Node, opts)
}

// Close closes the tracker's client, the node and the file systems, in
// that order; it does not finalize the node (psnode.Node.Finalize).
func (t *Task) Close() {
	if t.Tracker != nil {
		_ = t.Tracker.Close()
	}
	if t.Node != nil {
		_ = t.Node.Close()
	}
	if t.Files != nil {
		_ = t.Files.Close()
	}
}
