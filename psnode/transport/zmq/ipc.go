package zmq

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// maxIPCPath is the longest path a Unix socket address holds (sun_path
// is 108 bytes on Linux, including the terminating NUL).
const maxIPCPath = 107

// ipcPortRange is where Listen picks a port when asked for port 0 in
// Local mode; it is only a name, no TCP port is bound. It lies above the
// ports a local launcher draws the scheduler's from (below the kernel's
// ephemeral range, from 32768 by default), so that a node picking its
// port before the scheduler binds does not take the scheduler's.
const (
	ipcPortMin = 40000
	ipcPortMax = 60000
)

func defaultIPCDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "spindle-ipc-"+strconv.Itoa(os.Getuid()))
	if len(dir)+len("/65535.sealed") > maxIPCPath {
		return "", fmt.Errorf("zmq: ipc directory %q is too long for a Unix socket path; set IPCDir", dir)
	}
	return dir, nil
}

// ipcEndpoint returns the path of the ipc endpoint of port in dir.
func ipcEndpoint(dir string, port uint16) string {
	return filepath.Join(dir, strconv.Itoa(int(port))+".ipc")
}

// sealedIPCPath is the path of the sealed route's socket beside the ipc
// endpoint at path: the extension ".sealed" for ".ipc".
func sealedIPCPath(path string) string {
	return strings.TrimSuffix(path, ".ipc") + ".sealed"
}

// ipcLock is the exclusive claim of one Local transport on an ipc port:
// ZeroMQ unlinks whatever socket file is at the path it binds, so two
// transports binding the same port would silently steal each other's
// traffic. The claim is a flock on <port>.lock next to the endpoint,
// which the kernel releases if the process dies.
type ipcLock struct {
	port     uint16
	endpoint string
	path     string
	f        *os.File
}

var errPortInUse = errors.New("ipc port in use")

// lockIPC claims port in dir, or an unused port when port is 0.
func lockIPC(dir string, port uint16) (*ipcLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ipc directory: %w", err)
	}
	if port != 0 {
		l, err := tryLockIPC(dir, port)
		if errors.Is(err, errPortInUse) {
			return nil, fmt.Errorf("%s: %w", ipcEndpoint(dir, port), err)
		}
		return l, err
	}
	for range 100 {
		l, err := tryLockIPC(dir, uint16(ipcPortMin+rand.IntN(ipcPortMax-ipcPortMin)))
		if errors.Is(err, errPortInUse) {
			continue
		}
		return l, err
	}
	return nil, fmt.Errorf("no free ipc port in %s after 100 tries", dir)
}

func tryLockIPC(dir string, port uint16) (*ipcLock, error) {
	path := filepath.Join(dir, strconv.Itoa(int(port))+".lock")
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("ipc lock: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, errPortInUse
			}
			return nil, fmt.Errorf("ipc lock %s: %w", path, err)
		}
		// The previous holder may have removed the file between our open
		// and our flock; then the lock is on an orphan and we try again.
		held, err1 := f.Stat()
		named, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, named) {
			return &ipcLock{port: port, endpoint: ipcEndpoint(dir, port), path: path, f: f}, nil
		}
		_ = f.Close()
	}
}

// release removes the port's socket files (ZeroMQ closes a bound ipc
// socket without removing its file) and the lock file, then drops the
// lock. Holding the lock, nobody else can have bound the port since.
func (l *ipcLock) release() {
	_ = os.Remove(l.endpoint)
	_ = os.Remove(sealedIPCPath(l.endpoint))
	_ = os.Remove(l.path)
	_ = l.f.Close()
}
