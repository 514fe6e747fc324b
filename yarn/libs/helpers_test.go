package libs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// zmqSO is where libzmq3-dev puts the library on Debian and Ubuntu amd64.
const zmqSO = "/usr/lib/x86_64-linux-gnu/libzmq.so.5"

// goBuild builds the main package src (a cgo program when it imports "C")
// in a fresh module under dir and returns the binary. It skips the test if
// the go command or a C compiler is missing.
func goBuild(t *testing.T, dir, src string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not found: %v", err)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skipf("no C compiler for cgo: %v", err)
	}
	writeFile(t, filepath.Join(dir, "go.mod"), "module probe\n\ngo 1.22\n")
	writeFile(t, filepath.Join(dir, "main.go"), src)
	out := filepath.Join(dir, "probe")
	cmd := exec.Command(goCmd, "build", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// gcc runs the C compiler in dir, skipping the test if there is none.
func gcc(t *testing.T, dir string, args ...string) {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("no C compiler: %v", err)
	}
	cmd := exec.Command(cc, args...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sameFile reports whether a and b name the same file.
func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Errorf("stat %s: %v", a, err)
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Errorf("stat %s: %v", b, err)
		return false
	}
	return os.SameFile(fa, fb)
}

func byName(libs []Lib) map[string]Lib {
	m := make(map[string]Lib, len(libs))
	for _, l := range libs {
		m[l.Name] = l
	}
	return m
}

func names(libs []Lib) []string {
	var out []string
	for _, l := range libs {
		out = append(out, l.Name)
	}
	return out
}

// ldd returns soname → path as ldd reports for bin, or skips the test.
func ldd(t *testing.T, bin string) map[string]string {
	t.Helper()
	cmd, err := exec.LookPath("ldd")
	if err != nil {
		t.Skipf("ldd not found: %v", err)
	}
	b, err := exec.Command(cmd, bin).Output()
	if err != nil {
		t.Skipf("ldd %s: %v", bin, err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), " => ")
		if !ok {
			continue
		}
		p, _, _ := strings.Cut(rest, " (")
		m[name] = p
	}
	return m
}
