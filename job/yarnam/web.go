package yarnam

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/tracker"
)

// WebStatus is the job's status as the ApplicationMaster's web page
// serves it at /status.json. It holds no secret.
type WebStatus struct {
	Name         string             `json:"name"`
	State        tracker.JobState   `json:"state"`
	Epoch        int                `json:"epoch"`
	ShardsDone   int                `json:"shards_done"`
	ShardsTotal  int                `json:"shards_total"`
	Metrics      map[string]float64 `json:"metrics,omitempty"`
	MetricsEpoch int                `json:"metrics_epoch"`
	Roles        []WebRoleStatus    `json:"roles"`
	Diagnostics  string             `json:"diagnostics,omitempty"`
	Started      time.Time          `json:"started"`
}

// WebRoleStatus is one role's containers in WebStatus.
type WebRoleStatus struct {
	Role      conf.Role `json:"role"`
	Want      int       `json:"want"`
	Running   int       `json:"running"`
	Restarts  int       `json:"restarts"`
	Succeeded int       `json:"succeeded"`
}

func webStatus(name string, st tracker.Status) WebStatus {
	w := WebStatus{Name: name, State: st.State, Epoch: st.Epoch, ShardsDone: st.ShardsDone, ShardsTotal: st.ShardsTotal,
		Metrics: st.Metrics, MetricsEpoch: st.MetricsEpoch, Roles: []WebRoleStatus{}, Diagnostics: st.Diagnostics, Started: st.Started}
	for _, r := range st.Roles {
		w.Roles = append(w.Roles, WebRoleStatus(r))
	}
	return w
}

// webRefreshSeconds is the status page's auto-refresh interval.
const webRefreshSeconds = 5

var statusPage = template.Must(template.New("status").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{{.Refresh}}">
<title>{{.S.Name}} – {{.S.State}}</title>
<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}th:first-child,td:first-child{text-align:left}</style>
</head><body>
<h1>{{.S.Name}}</h1>
<p>State: <b>{{.S.State}}</b>{{if not .S.Started.IsZero}}, started {{.S.Started.UTC.Format "2006-01-02 15:04:05 MST"}}{{end}}</p>
<table><tr><th>role</th><th>want</th><th>running</th><th>restarts</th><th>succeeded</th></tr>
{{range .S.Roles}}<tr><td>{{.Role}}</td><td>{{.Want}}</td><td>{{.Running}}</td><td>{{.Restarts}}</td><td>{{.Succeeded}}</td></tr>
{{end}}</table>
<p>Epoch {{.S.Epoch}}: {{.S.ShardsDone}} of {{.S.ShardsTotal}} shards done</p>
{{if .Metrics}}<h2>Metrics (epoch {{.S.MetricsEpoch}})</h2>
<table>{{range .Metrics}}<tr><td>{{.K}}</td><td>{{.V}}</td></tr>
{{end}}</table>{{end}}
{{if .S.Diagnostics}}<h2>Diagnostics</h2><pre>{{.S.Diagnostics}}</pre>{{end}}
<p><a href="status.json">status.json</a></p>
</body></html>
`))

// StatusHandler serves the status of the job named name, read from st
// at every request: "/" is a small HTML page that refreshes itself and
// "/status.json" the same as JSON (WebStatus). It serves nothing else.
func StatusHandler(name string, st *tracker.State) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(webStatus(name, st.Status()))
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		s := webStatus(name, st.Status())
		type kv struct {
			K string
			V float64
		}
		var ms []kv
		for k, v := range s.Metrics {
			ms = append(ms, kv{k, v})
		}
		sort.Slice(ms, func(a, b int) bool { return ms[a].K < ms[b].K })
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_ = statusPage.Execute(w, struct {
			S       WebStatus
			Metrics []kv
			Refresh int
		}{s, ms, webRefreshSeconds})
	})
	return mux
}

// webServer serves StatusHandler on a listener until closed.
type webServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// serveWeb listens on addr and serves the job's status page behind
// filter (nil for none).
func serveWeb(addr, name string, st *tracker.State, log *logrus.Entry, filter func(http.Handler) http.Handler) (*webServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	h := StatusHandler(name, st)
	if filter != nil {
		h = filter(h)
	}
	w := &webServer{ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(w.done)
		if err := w.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Warn("status page server stopped")
		}
	}()
	return w, nil
}

// Port is the port the status page listens on.
func (w *webServer) Port() int { return w.ln.Addr().(*net.TCPAddr).Port }

// Close stops the server, letting requests in flight finish briefly.
func (w *webServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := w.srv.Shutdown(ctx); err != nil {
		w.srv.Close()
	}
	<-w.done
}
