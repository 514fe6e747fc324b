package local

import (
	"fmt"
	"os"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/internal/tempdir"
)

// A local job's nodes talk over Unix sockets (ZeroMQ's ipc://, ps-lite's
// DMLC_LOCAL=1) in a directory of the job's, mode 0700, rather than over
// TCP on the loopback: a message takes a shorter way through the kernel,
// no TCP port is used, and only the user's own processes can connect at
// all, before CURVE checks them. A task whose environment or job sets
// DMLC_LOCAL (--env DMLC_LOCAL=0 for TCP) keeps what it says.

// maxIPCDir bounds the directory's path: a node's socket path,
// "<dir>/<port>.sealed", must fit the 107 bytes of a Unix socket address.
const maxIPCDir = 107 - len("/65535.sealed")

// ipcDirFits reports whether a directory made by newIPCDir is short
// enough: the temporary directory's path may be too long (TMPDIR).
func ipcDirFits() bool {
	return len(os.TempDir())+len("/"+ipcDirPrefix+"0123456789") <= maxIPCDir
}

// ipcDirPrefix begins the name of a job's ipc directory.
const ipcDirPrefix = "spindle-ipc-"

// newIPCDir makes the job's ipc directory. It returns "" (the nodes then
// use TCP) when it would not fit (ipcDirFits).
func newIPCDir(log *logrus.Entry) (string, error) {
	if !ipcDirFits() {
		if log != nil {
			log.WithField("dir", os.TempDir()).Info("the temporary directory's path is too long for Unix sockets: the nodes use TCP")
		}
		return "", nil
	}
	dir, err := tempdir.New(ipcDirPrefix)
	if err != nil {
		return "", fmt.Errorf("local: a directory for the nodes' sockets: %w", err)
	}
	return dir, nil
}

// removeIPCDir removes the job's ipc directory, once no node runs.
func removeIPCDir(dir string, log *logrus.Entry) {
	if dir == "" {
		return
	}
	if err := os.RemoveAll(dir); err != nil && log != nil {
		log.WithError(err).Warn("could not remove the directory of the nodes' sockets")
	}
}
