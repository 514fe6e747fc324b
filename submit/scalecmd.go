package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/job/webauth"
	"github.com/spindle-ps/spindle/submit/yarnclient"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

// scaleTimeout bounds asking a local job's status page to scale.
const scaleTimeout = 10 * time.Second

// runScaleCommand runs "ps-submit scale JOB [--servers N] [--workers N]"
// and returns the exit status.
func runScaleCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	c, err := parseJobCommand(args[0], args[1:])
	if c.help {
		fmt.Fprintf(stdout, appCommandUsage, progName, killTimeout)
		return 0
	}
	if err == nil && isYARNJob(c.job) {
		if _, perr := yarn.ParseApplicationID(c.job); perr != nil {
			err = fmt.Errorf("%s: %q is not an application id (want application_<cluster timestamp>_<number>)", c.cmd, c.job)
		}
	}
	if err != nil {
		writeUsageError(stderr, err)
		return 2
	}
	if c.jobsDir == "" {
		c.jobsDir = defaultJobsDir(lookup)
	}
	rep, err := scaleJob(ctx, c, lookup)
	if err != nil {
		writeLines(stderr, progName+": ", err.Error())
		return 1
	}
	fmt.Fprintln(stdout, scaleMessage(c, rep))
	return 0
}

// scaleMessage says what c asked the job for, from the counts it had
// (rep), and when that takes effect.
func scaleMessage(c jobCommand, rep web.ScaleReply) string {
	var parts, same []string
	add := func(role string, asked, now int) {
		switch {
		case asked < 0: // not asked for
		case asked == now:
			parts = append(parts, fmt.Sprintf("%s %d (as many as the job has)", role, now))
			same = append(same, fmt.Sprintf("%s %d", role, now))
		default:
			parts = append(parts, fmt.Sprintf("%s %d → %d", role, now, asked))
		}
	}
	add("servers", c.servers, rep.Servers)
	add("workers", c.workers, rep.Workers)
	if len(same) == len(parts) {
		return fmt.Sprintf("scale requested: %s, as many as the job has: no change pending", strings.Join(same, " and "))
	}
	return fmt.Sprintf("scale requested: %s; it takes effect at the next epoch boundary", strings.Join(parts, ", "))
}

// scaleJob asks c's job for c.servers servers and c.workers workers
// (each when given) and returns the counts it had: a YARN application
// through its tracker, a local job through its status page (found by its
// id or directory, or given by its address).
func scaleJob(ctx context.Context, c jobCommand, lookup func(string) (string, bool)) (web.ScaleReply, error) {
	servers, workers := max(c.servers, 0), max(c.workers, 0) // 0: as it is
	if isYARNJob(c.job) {
		id, err := yarn.ParseApplicationID(c.job)
		if err != nil {
			return web.ScaleReply{}, fmt.Errorf("%s: %q is not an application id (want application_<cluster timestamp>_<number>)", c.cmd, c.job)
		}
		st, err := yarnclient.Scale(ctx, id, conf.Lookup(lookup), c.login, servers, workers)
		var re *tracker.RemoteError
		switch {
		case errors.As(err, &re):
			return web.ScaleReply{}, fmt.Errorf("%s: the job refused: %s", c.cmd, re.Message)
		case err != nil:
			return web.ScaleReply{}, fmt.Errorf("%s: %w", c.cmd, appError(id, err))
		}
		return web.ScaleReply{Servers: st.Servers, Target: orCount(servers, st.ServersTarget),
			Workers: st.Workers, WorkersTarget: orCount(workers, st.WorkersTarget)}, nil
	}
	switch st, over, err := localEnd(ctx, c); {
	case err != nil:
		return web.ScaleReply{}, err
	case over && ended(st):
		return web.ScaleReply{}, fmt.Errorf("%s: job %s has ended (%s): only a running job scales", c.cmd, c.job, st)
	}
	page, token, err := localPage(c)
	if err != nil {
		return web.ScaleReply{}, err
	}
	rep, err := postScale(ctx, page, token, servers, workers)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", c.cmd, err)
	}
	return rep, nil
}

// isPageAddress says whether a job is named by its status page's
// address, not by its id or directory.
func isPageAddress(job string) bool {
	return strings.HasPrefix(job, "http://") || strings.HasPrefix(job, "https://")
}

// orCount is n, or, for 0 (not asked for), standing.
func orCount(n, standing int) int {
	if n == 0 {
		return standing
	}
	return n
}

// localPage returns the status page of c's local job and its token: the
// address given ("http://127.0.0.1:port/?token=…", as ps-submit printed
// it), or the one in the job's directory.
func localPage(c jobCommand) (page, token string, err error) {
	if isPageAddress(c.job) {
		// As printed, the address may be followed by a semicolon.
		u, err := url.Parse(strings.TrimRight(c.job, ";,"))
		if err != nil || u.Host == "" {
			return "", "", fmt.Errorf("%s: %q is not a status page's address", c.cmd, c.job)
		}
		token = u.Query().Get(webauth.TokenParam)
		u.RawQuery, u.Fragment = "", ""
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		return u.String(), token, nil
	}
	dir, err := localJobDir(c.jobsDir, c.job)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", c.cmd, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, local.InfoFile))
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", c.cmd, err)
	}
	var info local.Info
	if err := json.Unmarshal(b, &info); err != nil {
		return "", "", fmt.Errorf("%s: %s: %w", c.cmd, filepath.Join(dir, local.InfoFile), err)
	}
	if info.URL == "" {
		return "", "", fmt.Errorf("%s: local job %s has no status page", c.cmd, c.job)
	}
	return info.URL, info.Token, nil
}

// postScale asks a local job's page for servers servers and workers
// workers, 0 for either leaving it as it is.
func postScale(ctx context.Context, page, token string, servers, workers int) (web.ScaleReply, error) {
	sctx, cancel := context.WithTimeout(ctx, scaleTimeout)
	defer cancel()
	form := url.Values{}
	if servers > 0 {
		form.Set("servers", strconv.Itoa(servers))
	}
	if workers > 0 {
		form.Set("workers", strconv.Itoa(workers))
	}
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, page+"scale", strings.NewReader(form.Encode()))
	if err != nil {
		return web.ScaleReply{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	body, err := doPage(req, token)
	if err != nil {
		return web.ScaleReply{}, err
	}
	var rep web.ScaleReply
	if err := json.Unmarshal(body, &rep); err != nil {
		return rep, fmt.Errorf("the answer of the job at %s: %w", page, err)
	}
	return rep, nil
}

// doPage sends req to a local job's page with its token and returns the
// body of a 200 answer; any other answer is an error saying what the
// page said.
func doPage(req *http.Request, token string) ([]byte, error) {
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the job's status page does not answer (is the job over? '%s status' says): %w", progName, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	msg := strings.TrimSpace(string(body))
	switch resp.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusBadRequest:
		return nil, fmt.Errorf("the job refused: %s", msg)
	case http.StatusForbidden:
		return nil, fmt.Errorf("the status page refused the request (%s): give the job's id, or the address with its token ps-submit printed", msg)
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return nil, fmt.Errorf("the status page at %s does not serve %s %s (%s): it is not a job started by this ps-submit", req.URL.Redacted(), req.Method, req.URL.Path, resp.Status)
	}
	return nil, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Redacted(), resp.Status, msg)
}
