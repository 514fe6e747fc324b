// Package browsertest runs pages in a real headless Chromium (Debian's
// chromium package, which scripts/test.sh installs) for the tests of the
// status page. Without a Chromium the tests skip, saying why, unless CI
// is set (CI=true) or SPINDLE_TEST_BROWSER=required, when they fail.
package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// Names under which Chromium is installed.
var names = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Required reports whether a missing browser fails the tests.
func Required() bool {
	ci := os.Getenv("CI")
	return (ci != "" && ci != "false" && ci != "0") || os.Getenv("SPINDLE_TEST_BROWSER") == "required"
}

// Chromium returns the browser's path; it skips t, or fails it when
// Required, when there is none.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if Required() {
		t.Fatalf("no Chromium on PATH (looked for %v) but CI or SPINDLE_TEST_BROWSER=required is set: install Debian's chromium package (scripts/test.sh does)", names)
	}
	t.Skipf("no Chromium on PATH (looked for %v); install Debian's chromium package", names)
	return ""
}

// Browser runs one headless Chromium command per call.
type Browser struct {
	path string
	dir  string
	// Budget is the virtual time the page may run (its timers fire at
	// once, network waits pause the clock) before the DOM is taken.
	Budget time.Duration
}

// New returns a Browser with its own profile directory, or skips or
// fails t as Chromium does.
func New(t testing.TB) *Browser {
	t.Helper()
	return &Browser{path: Chromium(t), dir: t.TempDir(), Budget: 8 * time.Second}
}

func (b *Browser) run(ctx context.Context, extra ...string) ([]byte, error) {
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--hide-scrollbars", "--user-data-dir=" + b.dir, "--window-size=1280,1100",
		"--virtual-time-budget=" + strconv.FormatInt(b.Budget.Milliseconds(), 10)}
	cmd := exec.CommandContext(ctx, b.path, append(args, extra...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		return out, &Error{Err: err, Stderr: stderr.String()}
	}
	return out, nil
}

// DOM loads url, lets it run for Budget and returns the serialized DOM.
func (b *Browser) DOM(ctx context.Context, url string) (string, error) {
	out, err := b.run(ctx, "--dump-dom", url)
	return string(out), err
}

// Screenshot loads url, lets it run for Budget and saves a PNG of the
// window to file.
func (b *Browser) Screenshot(ctx context.Context, url, file string) error {
	_, err := b.run(ctx, "--screenshot="+file, url)
	return err
}

// Error is a failed Chromium run, with what it wrote on its standard
// error.
type Error struct {
	Err    error
	Stderr string
}

func (e *Error) Error() string {
	s := e.Stderr
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return "chromium: " + e.Err.Error() + ": " + s
}

func (e *Error) Unwrap() error { return e.Err }

// Figure returns the data-series and data-points attributes of the
// element with id in dom (the status page's chart figures); ok is false
// when it is not there or lacks them.
func Figure(dom, id string) (series string, points int, ok bool) {
	m := regexp.MustCompile(`<figure id="` + regexp.QuoteMeta(id) + `"[^>]*>`).FindString(dom)
	s := regexp.MustCompile(`data-series="([^"]*)"`).FindStringSubmatch(m)
	p := regexp.MustCompile(`data-points="(\d+)"`).FindStringSubmatch(m)
	if m == "" || s == nil || p == nil {
		return "", 0, false
	}
	n, _ := strconv.Atoi(p[1])
	return s[1], n, true
}

// Drawn returns how many times the status page in dom drew its data (its
// body's data-drawn attribute).
func Drawn(dom string) int {
	m := regexp.MustCompile(`<body[^>]*data-drawn="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// LoadDrawn loads the status page at url until it has drawn its data at
// least once, three tries at most (a busy machine may need more than one
// budget), and returns its DOM.
func (b *Browser) LoadDrawn(ctx context.Context, url string) (string, error) {
	var dom string
	for try := 0; try < 3; try++ {
		var err error
		if dom, err = b.DOM(ctx, url); err != nil {
			return dom, err
		}
		if Drawn(dom) > 0 {
			return dom, nil
		}
	}
	return dom, fmt.Errorf("browsertest: the page at %s never drew its data:\n%s", url, dom)
}
