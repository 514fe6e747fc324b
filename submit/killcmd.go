package submit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/tracker"
)

// killPoll is how often "ps-submit kill" asks a local job's page whether
// the job has ended.
const killPoll = 100 * time.Millisecond

// runKillCommand runs "ps-submit kill JOB" and returns the exit status:
// a YARN application is killed through the ResourceManager
// (runYARNKill), a local job through its status page.
func runKillCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	c, err := parseJobCommand(args[0], args[1:])
	if c.help {
		fmt.Fprintf(stdout, appCommandUsage, progName, killTimeout)
		return 0
	}
	if err == nil && isYARNJob(c.job) {
		return runYARNKill(ctx, args, stdout, stderr, lookup)
	}
	if err != nil {
		writeUsageError(stderr, err)
		return 2
	}
	if c.jobsDir == "" {
		c.jobsDir = defaultJobsDir(lookup)
	}
	st, already, err := killLocal(ctx, c)
	if err != nil {
		writeLines(stderr, progName+": ", err.Error())
		return 1
	}
	if already {
		fmt.Fprintf(stdout, "%s: job %s had already ended: %s\n", progName, c.job, st)
	} else {
		fmt.Fprintf(stdout, "%s: job %s %s\n", progName, c.job, st)
	}
	return 0
}

// killLocal asks c's local job to end through its status page, and waits
// up to killTimeout until it has: it returns the state the job ended in,
// and whether it had ended before it was asked.
func killLocal(ctx context.Context, c jobCommand) (st tracker.JobState, already bool, err error) {
	if st, over, err := localEnd(ctx, c); err != nil || over {
		return st, over, err
	}
	page, token, err := localPage(c)
	if err != nil {
		return "", false, err
	}
	kctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(kctx, http.MethodPost, page+"kill", nil)
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", c.cmd, err)
	}
	body, err := doPage(req, token)
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", c.cmd, err)
	}
	var rep web.KillReply
	if err := json.Unmarshal(body, &rep); err != nil {
		return "", false, fmt.Errorf("%s: the answer of the job at %s: %w", c.cmd, page, err)
	}
	if ended(rep.State) {
		return rep.State, true, nil
	}
	tick := time.NewTicker(killPoll)
	defer tick.Stop()
	for {
		s, err := pageStatus(kctx, page, token)
		switch {
		case err == nil && ended(s.State):
			return s.State, false, nil
		case err != nil && kctx.Err() == nil:
			// The page closed: its ps-submit has ended the job and
			// recorded how, when the job has a directory.
			return endedState(ctx, c), false, nil
		}
		select {
		case <-tick.C:
		case <-kctx.Done():
			return "", false, fmt.Errorf("%s: the job at %s was asked to end, and had not within %v ('%s status' tells how it goes)", c.cmd, page, killTimeout, progName)
		}
	}
}

// ended says whether a job in state st is over.
func ended(st tracker.JobState) bool {
	return st == tracker.Succeeded || st == tracker.Failed || st == tracker.Killed
}

// pageStatus reads a local job's status from its page, within
// localStatusTimeout.
func pageStatus(ctx context.Context, page, token string) (*web.Status, error) {
	sctx, cancel := context.WithTimeout(ctx, localStatusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, page+"status.json", nil)
	if err != nil {
		return nil, err
	}
	body, err := doPage(req, token)
	if err != nil {
		return nil, err
	}
	var s web.Status
	if err := json.Unmarshal(body, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// localEnd reports whether c's local job is over, its page no longer
// answering, and how it ended, as its directory records it; a job named
// by its page's address has no directory to tell (over is false). The
// error is that of a job c cannot find.
func localEnd(ctx context.Context, c jobCommand) (st tracker.JobState, over bool, err error) {
	if isPageAddress(c.job) {
		return "", false, nil
	}
	dir, err := localJobDir(c.jobsDir, c.job)
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", c.cmd, err)
	}
	if _, s, live, err := localJobStatus(ctx, dir); err == nil && !live && s != nil {
		return s.State, true, nil
	}
	return "", false, nil
}

// endedState is how c's local job ended, as its directory records it;
// "ENDED" when c names the job by its page's address, or the record
// is missing.
func endedState(ctx context.Context, c jobCommand) tracker.JobState {
	if st, over, _ := localEnd(ctx, c); over {
		return st
	}
	return "ENDED"
}
