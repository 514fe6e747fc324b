package yarnclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/web"
	"github.com/spindle-ps/spindle/job/yarnam"
	"github.com/spindle-ps/spindle/yarn"
)

// webTimeout bounds one request to the ResourceManager's web proxy or a
// NodeManager.
const webTimeout = 20 * time.Second

var webClient = &http.Client{Timeout: webTimeout}

// maxStatusJSON bounds the status page's JSON read.
const maxStatusJSON = 64 << 20

// JobStatus returns application id's report and the job's own status
// (epochs, metrics, speeds, tasks): from the ApplicationMaster's status
// page while the application runs (through the application's tracking
// URL, the ResourceManager's web proxy), else the final status the
// ApplicationMaster kept beside the containers' logs (LogsURI). st is nil
// when neither can be read, stErr saying why; err is the report's
// failure.
func JobStatus(ctx context.Context, id yarn.ApplicationID, lookup conf.Lookup, login Login) (r yarn.ApplicationReport, st *web.Status, stErr error, err error) {
	rm, hcl, err := yarnClient(ctx, lookup, login)
	if err != nil {
		return r, nil, nil, err
	}
	hc, user := hcl.hc, hcl.user
	defer rm.Close()
	if r, err = rm.ApplicationReport(ctx, id); err != nil {
		return r, nil, nil, fmt.Errorf("yarnclient: report of application %s: %w", id, err)
	}
	if r.State == yarn.AppRunning {
		st, stErr = pageStatus(ctx, hc, hcl.web(rmWebPrincipal), r)
		if stErr == nil {
			return r, st, nil, nil
		}
	}
	resolver := hcl.resolver()
	defer resolver.Close()
	fst, err := finalStatus(ctx, resolver, LogsURI(user, id))
	if err != nil {
		return r, nil, errors.Join(stErr, err), nil
	}
	return r, fst, nil, nil
}

// pageStatus reads the running ApplicationMaster's status.json through
// r's tracking URL.
func pageStatus(ctx context.Context, hc conf.HadoopConf, client *http.Client, r yarn.ApplicationReport) (*web.Status, error) {
	u, err := trackingURL(hc, r)
	if err != nil {
		return nil, err
	}
	b, err := getWeb(ctx, client, u+"status.json", r.ID)
	if err != nil {
		return nil, err
	}
	var st web.Status
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("yarnclient: status of application %s at %s: %w", r.ID, u, err)
	}
	return &st, nil
}

// trackingURL is r's tracking URL, ending in "/", reachable: a
// ResourceManager that built its proxy's address before its web server
// bound a port says port 0; the configured web address is used then.
func trackingURL(hc conf.HadoopConf, r yarn.ApplicationReport) (string, error) {
	if !strings.HasPrefix(r.TrackingURL, "http") {
		return "", fmt.Errorf("yarnclient: application %s has no tracking URL yet", r.ID)
	}
	u, err := url.Parse(r.TrackingURL)
	if err != nil {
		return "", fmt.Errorf("yarnclient: tracking URL of application %s: %w", r.ID, err)
	}
	if u.Port() == "0" {
		if web, ok := hc.Get("yarn.resourcemanager.webapp.address"); ok && web != "" {
			u.Host = web
		}
	}
	s := u.String()
	if !strings.HasSuffix(s, "/") {
		s += "/"
	}
	return s, nil
}

// getWeb GETs u, with the cookie that takes the ResourceManager's proxy
// past its warning page for application id.
func getWeb(ctx context.Context, client *http.Client, u string, id yarn.ApplicationID) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.AddCookie(&http.Cookie{Name: "checked_" + id.String(), Value: "true"})
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("yarnclient: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusJSON))
	if err != nil {
		return nil, fmt.Errorf("yarnclient: %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		if len(b) > 300 {
			b = b[:300]
		}
		return nil, fmt.Errorf("yarnclient: %s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// finalStatus reads the status the ApplicationMaster kept in dir.
func finalStatus(ctx context.Context, r *dfs.Resolver, dir string) (*web.Status, error) {
	fsys, p, err := r.Resolve(ctx, dir)
	if err != nil {
		return nil, err
	}
	f, err := fsys.Open(ctx, path.Join(p, yarnam.StatusFile))
	if err != nil {
		return nil, fmt.Errorf("yarnclient: the job's final status: %w", err)
	}
	defer f.Close()
	var st web.Status
	if err := json.NewDecoder(io.LimitReader(f, maxStatusJSON)).Decode(&st); err != nil {
		return nil, fmt.Errorf("yarnclient: the job's final status %s: %w", fsys.URI(path.Join(p, yarnam.StatusFile)), err)
	}
	return &st, nil
}

// LogFile is one output file (stdout or stderr) of one launch of a task.
type LogFile struct {
	Task job.Task
	// Seq is the launch's number among the task's (job.LogName).
	Seq    int
	Stream string
	// Where says where it is read from: a container on a NodeManager, or
	// an HDFS URI.
	Where string
	open  func(ctx context.Context) (io.ReadCloser, error)
}

// Open opens the file; its content is read from its start.
func (f LogFile) Open(ctx context.Context) (io.ReadCloser, error) { return f.open(ctx) }

// Logs lists the output files of application id's tasks, and whether
// the application is over. While it runs, the current or last launch of
// each task is read from its NodeManager's web services and the launches
// that ended before from the job's log directory in HDFS (LogsURI),
// where the ApplicationMaster copies them; once it is over, from HDFS
// only. Files are sorted by task, launch and stream.
func Logs(ctx context.Context, id yarn.ApplicationID, lookup conf.Lookup, login Login) (files []LogFile, over bool, err error) {
	rm, hcl, err := yarnClient(ctx, lookup, login)
	if err != nil {
		return nil, false, err
	}
	hc, user := hcl.hc, hcl.user
	defer rm.Close()
	r, err := rm.ApplicationReport(ctx, id)
	if err != nil {
		return nil, false, fmt.Errorf("yarnclient: report of application %s: %w", id, err)
	}
	resolver := hcl.resolver()
	defer resolver.Close()
	seen := map[string]bool{}
	if !r.State.Terminal() {
		st, err := pageStatus(ctx, hc, hcl.web(rmWebPrincipal), r)
		if err != nil && r.State == yarn.AppRunning {
			return nil, false, err
		}
		if st != nil {
			nm := hcl.web(nmWebPrincipal)
			for _, t := range st.Tasks {
				if t.Container == "" || t.LogsAt == "" {
					continue
				}
				task, seq := job.Task{Role: t.Role, Rank: t.Rank}, t.Restarts
				for _, stream := range job.Streams {
					addr, cont, stream := t.LogsAt, t.Container, stream
					seen[job.LogName(task, seq, stream)] = true
					files = append(files, LogFile{Task: task, Seq: seq, Stream: stream, Where: cont + " on " + addr,
						open: func(ctx context.Context) (io.ReadCloser, error) {
							return yarn.ContainerLog(ctx, nm, addr, cont, stream, user)
						}})
				}
			}
		}
	}
	fsys, dir, err := resolver.Resolve(ctx, LogsURI(user, id))
	if err != nil {
		return nil, false, err
	}
	infos, err := fsys.ReadDir(ctx, dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("yarnclient: the job's logs: %w", err)
	}
	for _, fi := range infos {
		task, seq, stream, ok := job.ParseLogName(fi.Name())
		if !ok || seen[fi.Name()] {
			continue
		}
		name := path.Join(dir, fi.Name())
		files = append(files, LogFile{Task: task, Seq: seq, Stream: stream, Where: fsys.URI(name),
			open: func(ctx context.Context) (io.ReadCloser, error) {
				// The resolver is closed when Logs returns: a new one per read.
				res := hcl.resolver()
				f, p, err := res.Resolve(ctx, fsys.URI(name))
				if err != nil {
					res.Close()
					return nil, err
				}
				rc, err := f.Open(ctx, p)
				if err != nil {
					res.Close()
					return nil, err
				}
				return closeBoth{rc, res}, nil
			}})
	}
	SortLogFiles(files)
	return files, r.State.Terminal(), nil
}

// closeBoth is a file whose resolver closes with it.
type closeBoth struct {
	io.ReadCloser
	res *dfs.Resolver
}

func (c closeBoth) Close() error {
	err := c.ReadCloser.Close()
	c.res.Close()
	return err
}

// SortLogFiles orders files by task (role order of job.Tasks, then rank),
// launch and stream (stdout first).
func SortLogFiles(files []LogFile) {
	roleOrder := map[conf.Role]int{conf.RoleScheduler: 0, conf.RoleServer: 1, conf.RoleWorker: 2}
	less := func(a, b LogFile) bool {
		if a.Task.Role != b.Task.Role {
			return roleOrder[a.Task.Role] < roleOrder[b.Task.Role]
		}
		if a.Task.Rank != b.Task.Rank {
			return a.Task.Rank < b.Task.Rank
		}
		if a.Seq != b.Seq {
			return a.Seq < b.Seq
		}
		return a.Stream > b.Stream // stdout before stderr
	}
	for i := 1; i < len(files); i++ {
		for j := i; j > 0 && less(files[j], files[j-1]); j-- {
			files[j], files[j-1] = files[j-1], files[j]
		}
	}
}
