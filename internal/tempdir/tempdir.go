// Package tempdir makes a process's private directories in the temporary
// directory so that those of a process that died without removing them
// (SIGKILL, a crash, an out-of-memory kill) are removed by the next
// process that makes one of the same kind: a job's keys file must not
// outlive the job by days because its launcher was killed.
//
// Each directory holds a file, OwnerFile, naming its maker: the inode of
// its PID namespace (so that a process in another namespace sharing the
// temporary directory, whose ids this one cannot see, is never taken for
// dead) and its process id. The directory's own name is os.MkdirTemp's,
// as short as before: a Unix socket's path inside it must stay short.
package tempdir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// OwnerFile is the file in each directory that names its maker, as
// "<PID namespace inode> <pid>\n".
const OwnerFile = ".owner"

// New makes a directory of mode 0700 in os.TempDir whose name begins
// with prefix, after removing the directories of the same prefix that
// this user's dead processes left (Sweep).
func New(prefix string) (string, error) {
	ns, ok := pidNamespace()
	if ok {
		Sweep(prefix)
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil || !ok {
		return dir, err
	}
	owner := fmt.Sprintf("%d %d\n", ns, os.Getpid())
	if err := os.WriteFile(filepath.Join(dir, OwnerFile), []byte(owner), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// Sweep removes the directories in os.TempDir whose names begin with
// prefix that belong to this user and that New made in this PID
// namespace for a process that no longer runs. It returns the paths it
// removed; it fails on nothing (what it cannot read or remove is left).
func Sweep(prefix string) []string {
	ns, ok := pidNamespace()
	if !ok {
		return nil
	}
	dir := os.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		info, err := e.Info()
		if err != nil {
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		owner, ok := readOwner(path)
		if !ok || owner.ns != ns || running(owner.pid) {
			continue
		}
		if os.RemoveAll(path) == nil {
			removed = append(removed, path)
		}
	}
	return removed
}

type owner struct {
	ns  uint64
	pid int
}

// readOwner reads dir's OwnerFile.
func readOwner(dir string) (owner, bool) {
	f, err := os.Open(filepath.Join(dir, OwnerFile))
	if err != nil {
		return owner{}, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return owner{}, false
	}
	nsText, pidText, ok := strings.Cut(strings.TrimSuffix(string(b), "\n"), " ")
	if !ok {
		return owner{}, false
	}
	ns, err1 := strconv.ParseUint(nsText, 10, 64)
	pid, err2 := strconv.Atoi(pidText)
	if err1 != nil || err2 != nil || pid <= 0 {
		return owner{}, false
	}
	return owner{ns: ns, pid: pid}, true
}

// running says whether process pid exists (possibly another user's, or
// a new process that took a dead one's id: such a directory is kept).
func running(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// pidNamespace returns the inode of this process's PID namespace, false
// where /proc does not tell it.
func pidNamespace() (uint64, bool) {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return 0, false
	}
	// "pid:[4026531836]"
	inner, ok := strings.CutPrefix(link, "pid:[")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(inner, "]"), 10, 64)
	return n, err == nil
}
