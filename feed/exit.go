package feed

import (
	"errors"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/records"
	"github.com/spindle-ps/spindle/io/split"
	"github.com/spindle-ps/spindle/psnode"
)

// ExitStatus returns the status a worker program exits with after its
// run returned err: 0 for nil; conf.ExitRestartJob when a synchronous
// worker died (psnode.ErrSyncWorkerDied: the steps of the epoch cannot be
// completed) or a server that replaced a dead one could not restore its
// tables from their replicas (psnode.ErrNoReplica), and the launcher
// starts the whole job again from its newest checkpoint;
// conf.ExitBadInput for a malformed record (records.ErrSyntax) the
// worker could not skip, a compressed input file that is corrupt
// (split.ErrCorrupt), or an HDFS this client cannot read from
// (dfs.ErrProtectedReads), which the launcher does not start it again
// for; 1 otherwise.
func ExitStatus(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, psnode.ErrSyncWorkerDied), errors.Is(err, psnode.ErrNoReplica):
		return conf.ExitRestartJob
	case errors.Is(err, records.ErrSyntax), errors.Is(err, split.ErrCorrupt), errors.Is(err, dfs.ErrProtectedReads):
		return conf.ExitBadInput
	default:
		return 1
	}
}
