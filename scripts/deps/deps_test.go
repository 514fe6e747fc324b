// Package deps checks the direction of imports that DESIGN.md fixes, so
// that a change that breaks it fails the tests.
package deps

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/spindle-ps/spindle"

// packages returns each package of the module with its transitive
// dependencies (tests excluded).
func packages(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkgs[strings.TrimPrefix(f[0], module+"/")] = f[1:]
	}
	return pkgs
}

func TestImportDirection(t *testing.T) {
	t.Parallel()
	rules := []struct {
		name      string
		from      func(pkg string) bool
		forbidden []string // import path prefixes
	}{
		{
			name:      "conf uses the standard library only",
			from:      func(p string) bool { return p == "conf" },
			forbidden: []string{"github.com/", "golang.org/", "go.uber.org/"},
		},
		{
			name: "psnode runs anywhere: no yarn, tracker, io, submit",
			from: func(p string) bool { return strings.HasPrefix(p, "psnode") },
			forbidden: []string{
				module + "/yarn", module + "/tracker", module + "/io/", module + "/submit",
			},
		},
		{
			name: "psnode builds without cgo: only its zmq transport and launch link ZeroMQ",
			from: func(p string) bool {
				return strings.HasPrefix(p, "psnode") && p != "psnode/transport/zmq" && p != "psnode/launch"
			},
			forbidden: []string{"github.com/pebbe/zmq4", module + "/psnode/transport/zmq"},
		},
		{
			name: "yarn speaks Hadoop's protocols on its own: no psnode, tracker, io, submit",
			from: func(p string) bool { return p == "yarn" || strings.HasPrefix(p, "yarn/") },
			forbidden: []string{
				module + "/psnode", module + "/tracker", module + "/io/", module + "/submit",
			},
		},
		{
			name:      "io never imports psnode",
			from:      func(p string) bool { return strings.HasPrefix(p, "io/") },
			forbidden: []string{module + "/psnode"},
		},
	}
	pkgs := packages(t)
	for _, r := range rules {
		for pkg, deps := range pkgs {
			if !r.from(pkg) {
				continue
			}
			for _, d := range deps {
				for _, f := range r.forbidden {
					if strings.HasPrefix(d, f) {
						t.Errorf("%s: %s depends on %s", r.name, pkg, d)
					}
				}
			}
		}
	}
}
