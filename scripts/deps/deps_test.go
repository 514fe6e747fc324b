// Package deps checks the direction of imports that DESIGN.md fixes, so
// that a change that breaks it fails the tests:
//
//	cmd → submit → job → {tracker, yarn, io, psnode} → conf
//
// with examples/* (workers) beside, linking neither YARN nor the job's
// supervisor nor the command, and reading their data through
// feed → {tracker, io, psnode, conf}; examples/dense trains with
// psnode/collective alone, without the servers' tables.
package deps

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/spindle-ps/spindle"

// pkg is one package of the module, its import path without the module
// prefix.
type pkg struct {
	imports []string // direct imports, full paths
	deps    []string // transitive dependencies, full paths
}

// packages lists the module's packages with their imports and
// dependencies (tests excluded: a test may reach further, as an
// end-to-end test of a worker submits it to YARN).
func packages(t *testing.T) map[string]pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-f",
		`{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 3 {
			t.Fatalf("go list printed %q", line)
		}
		pkgs[strings.TrimPrefix(f[0], module+"/")] = pkg{imports: strings.Fields(f[1]), deps: strings.Fields(f[2])}
	}
	return pkgs
}

// under reports whether p is dir or a package below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// in returns a test of whether a package is under one of dirs.
func in(dirs ...string) func(string) bool {
	return func(p string) bool {
		for _, d := range dirs {
			if under(p, d) {
				return true
			}
		}
		return false
	}
}

// inModule returns the module packages among paths, without the module
// prefix.
func inModule(paths []string) []string {
	var out []string
	for _, p := range paths {
		if rel, ok := strings.CutPrefix(p, module+"/"); ok {
			out = append(out, rel)
		}
	}
	return out
}

// rule forbids packages that from matches to depend (or, with direct, to
// import) on the module's packages that to matches.
type rule struct {
	name   string
	from   func(string) bool
	to     func(string) bool
	direct bool
}

// violations lists "pkg → dep" for every arrow that breaks r.
func (r rule) violations(pkgs map[string]pkg) []string {
	var bad []string
	for name, p := range pkgs {
		if !r.from(name) {
			continue
		}
		deps := p.deps
		if r.direct {
			deps = p.imports
		}
		for _, d := range inModule(deps) {
			if r.to(d) {
				bad = append(bad, name+" → "+d)
			}
		}
	}
	sort.Strings(bad)
	return bad
}

func not(f func(string) bool) func(string) bool { return func(p string) bool { return !f(p) } }

var rules = []rule{
	{
		name:   "cmd calls submit alone",
		from:   in("cmd"),
		to:     not(in("submit")),
		direct: true,
	},
	{
		name: "nothing but cmd imports submit",
		from: not(in("cmd", "submit")),
		to:   in("submit"),
	},
	{
		name: "job sits under submit: no submit, cmd, examples",
		from: in("job"),
		to:   in("submit", "cmd", "examples"),
	},
	{
		name: "the job's policy knows no cluster: package job imports neither its clusters nor yarn",
		from: func(p string) bool { return p == "job" },
		to:   in("job/local", "job/yarnam", "yarn"),
	},
	{
		name: "tracker imports only conf and io (and its own internal packages)",
		from: in("tracker"),
		to:   not(in("conf", "io", "tracker", "internal/hadoop")), // io stands on internal/hadoop
	},
	{
		name: "yarn speaks Hadoop's protocols on its own: conf and the shared Hadoop IPC only",
		from: in("yarn"),
		to:   not(in("conf", "yarn", "internal/hadoop")),
	},
	{
		name: "io imports only conf, io and the shared Hadoop IPC",
		from: in("io"),
		to:   not(in("conf", "io", "internal/hadoop")),
	},
	{
		name: "the shared Hadoop IPC stands below yarn and io: conf only",
		from: in("internal/hadoop"),
		to:   not(in("conf", "internal/hadoop")),
	},
	{
		name: "psnode runs anywhere: conf only",
		from: in("psnode"),
		to:   not(in("conf", "psnode")),
	},
	{
		name: "feed is the workers' data loop: tracker, io, psnode and conf only",
		from: in("feed"),
		to:   not(in("tracker", "io", "psnode", "conf", "feed", "internal/hadoop")),
	},
	{
		name:   "examples/dense trains with collectives: no servers' tables or partitioners",
		from:   in("examples/dense"),
		to:     in("psnode/store", "psnode/partition"),
		direct: true,
	},
	{
		name: "workers link neither YARN nor the supervisor nor the command",
		from: in("examples"),
		to:   in("yarn", "job", "submit", "cmd"),
	},
}

func TestImportDirection(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	for _, r := range rules {
		for _, v := range r.violations(pkgs) {
			t.Errorf("%s: %s", r.name, v)
		}
	}
}

func TestConfUsesTheStandardLibraryOnly(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	for _, d := range pkgs["conf"].deps {
		if first, _, _ := strings.Cut(d, "/"); strings.Contains(first, ".") {
			t.Errorf("conf depends on %s", d)
		}
	}
}

func TestPsnodeBuildsWithoutCgo(t *testing.T) {
	t.Parallel()
	pkgs := packages(t)
	for name, p := range pkgs {
		// kvbench is a program (ps-lite's benchmark as real processes), so
		// it starts its nodes with launch as every job's program does.
		if !under(name, "psnode") || name == "psnode/transport/zmq" || name == "psnode/launch" || name == "psnode/internal/kvbench" {
			continue
		}
		for _, d := range p.deps {
			if d == "github.com/pebbe/zmq4" || d == module+"/psnode/transport/zmq" {
				t.Errorf("%s depends on %s: only psnode's zmq transport and launch link ZeroMQ", name, d)
			}
		}
	}
}

// TestRulesCatchWrongArrows checks each rule against a module that breaks
// it, so that a rule that can no longer fail is noticed.
func TestRulesCatchWrongArrows(t *testing.T) {
	t.Parallel()
	wrong := map[string]map[string]pkg{
		"cmd calls submit alone":                          {"cmd/ps-submit": {imports: []string{module + "/tracker"}}},
		"nothing but cmd imports submit":                  {"job/yarnam": {deps: []string{module + "/submit/yarnclient"}}},
		"job sits under submit: no submit, cmd, examples": {"job/local": {deps: []string{module + "/submit"}}},
		"the job's policy knows no cluster: package job imports neither its clusters nor yarn": {"job": {deps: []string{module + "/yarn"}}},
		"tracker imports only conf and io (and its own internal packages)":                     {"tracker": {deps: []string{module + "/yarn"}}},
		"yarn speaks Hadoop's protocols on its own: conf and the shared Hadoop IPC only":       {"yarn/libs": {deps: []string{module + "/io/dfs"}}},
		"io imports only conf, io and the shared Hadoop IPC":                                   {"io/model": {deps: []string{module + "/psnode"}}},
		"the shared Hadoop IPC stands below yarn and io: conf only":                            {"internal/hadoop/hrpc": {deps: []string{module + "/yarn"}}},
		"psnode runs anywhere: conf only":                                                      {"psnode/launch": {deps: []string{module + "/tracker"}}},
		"feed is the workers' data loop: tracker, io, psnode and conf only":                    {"feed": {deps: []string{module + "/job"}}},
		"workers link neither YARN nor the supervisor nor the command":                         {"examples/lr": {deps: []string{module + "/yarn/internal/proto"}}},
		"examples/dense trains with collectives: no servers' tables or partitioners":           {"examples/dense/dense": {imports: []string{module + "/psnode/store"}}},
	}
	for _, r := range rules {
		pkgs, ok := wrong[r.name]
		if !ok {
			t.Errorf("rule %q has no wrong module to catch", r.name)
			continue
		}
		if len(r.violations(pkgs)) == 0 {
			t.Errorf("rule %q does not catch %v", r.name, pkgs)
		}
	}
}
