package yarnam

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

// logCopyTimeout bounds the copy of one ended container's logs.
const logCopyTimeout = 30 * time.Second

// maxLogCopy bounds the bytes of one log file copied into the job's log
// directory: its first bytes are kept.
const maxLogCopy = 256 << 20

var nmHTTP = &http.Client{Timeout: time.Minute}

// nmLogs opens a task's output from its NodeManager (web.LogOpener).
func nmLogs(user string) web.LogOpener {
	return func(ctx context.Context, t tracker.TaskStatus, stream string) (io.ReadCloser, error) {
		return yarn.ContainerLog(ctx, nmHTTP, t.Logs, t.Container, stream, user)
	}
}

// copyLogsLocked starts copying the logs of ln's container, which ended,
// into the job's log directory, when there is one. c.mu must be held;
// Close waits for the copies.
func (c *Cluster) copyLogsLocked(ln *launch) {
	if c.opts.LogDir == "" || c.opts.Resolver == nil {
		return
	}
	c.copies.Add(1)
	go func() {
		defer c.copies.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), logCopyTimeout)
		defer cancel()
		for _, stream := range job.Streams {
			if err := c.copyLog(ctx, ln, stream); err != nil {
				c.log.WithError(err).WithFields(logrus.Fields{"task": ln.l.Task.String(), "container": ln.ct.ID.String()}).Warn("container log not kept")
			}
		}
	}()
}

// StatusFile is the name of the job's final status (web.Status, JSON) in
// Options.LogDir.
const StatusFile = "status.json"

// writeFinalStatus keeps st in dir's StatusFile, for "ps-submit status"
// once the application is over.
func writeFinalStatus(ctx context.Context, r job.Resolver, dir string, st web.Status) error {
	fsys, p, err := r.Resolve(ctx, dir)
	if err != nil {
		return err
	}
	if err := fsys.MkdirAll(ctx, p, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return dfs.WriteAtomic(ctx, fsys, path.Join(p, StatusFile), func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

// copyLog copies one log file of ln's container.
func (c *Cluster) copyLog(ctx context.Context, ln *launch, stream string) error {
	fsys, dir, err := c.opts.Resolver.Resolve(ctx, c.opts.LogDir)
	if err != nil {
		return err
	}
	if err := fsys.MkdirAll(ctx, dir, 0o755); err != nil {
		return err
	}
	rc, err := yarn.ContainerLog(ctx, nmHTTP, ln.ct.NodeHTTPAddress, ln.ct.ID.String(), stream, c.opts.User)
	if err != nil {
		return err
	}
	defer rc.Close()
	name := path.Join(dir, job.LogName(ln.l.Task, ln.l.Seq, stream))
	return dfs.WriteAtomic(ctx, fsys, name, func(w io.Writer) error {
		if _, err := io.Copy(w, io.LimitReader(rc, maxLogCopy)); err != nil {
			return fmt.Errorf("copy from the node manager: %w", err)
		}
		return nil
	})
}
