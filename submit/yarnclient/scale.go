package yarnclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"strconv"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

// scaleTimeout bounds Scale's calls of the job's tracker.
const scaleTimeout = 20 * time.Second

// maxKeysFile bounds the keys file Scale reads from the staging
// directory.
const maxKeysFile = 1 << 20

// Scale asks the job of running application id for servers servers and
// workers workers, 0 for either leaving it as it is
// (tracker.State.Scale), from an epoch boundary on, and returns the
// job's status as it was just before. It calls the job's tracker in the
// ApplicationMaster (the host and RPC port of the application's report)
// with the job's secret and certificate, which it reads from the keys
// file in the application's staging directory: HDFS lets the user who
// submitted the job alone read it, so that no one else who may view the
// application can change it. A refusal of the job is a
// *tracker.RemoteError.
func Scale(ctx context.Context, id yarn.ApplicationID, lookup conf.Lookup, login Login, servers, workers int) (tracker.Status, error) {
	rm, hcl, err := yarnClient(ctx, lookup, login)
	if err != nil {
		return tracker.Status{}, err
	}
	defer rm.Close()
	r, err := rm.ApplicationReport(ctx, id)
	if err != nil {
		return tracker.Status{}, fmt.Errorf("yarnclient: report of application %s: %w", id, err)
	}
	if r.State != yarn.AppRunning || r.RPCPort <= 0 || r.Host == "" || r.Host == "N/A" {
		return tracker.Status{}, fmt.Errorf("yarnclient: application %s is %v, not running its job", id, r.State)
	}
	keys, err := stagedKeys(ctx, hcl, id)
	if err != nil {
		return tracker.Status{}, err
	}
	ctls, err := keys.ClientTLS()
	if err != nil {
		return tracker.Status{}, fmt.Errorf("yarnclient: keys of application %s: %w", id, err)
	}
	tc := tracker.NewClient(net.JoinHostPort(r.Host, strconv.Itoa(int(r.RPCPort))), keys.Secret, tracker.WithTLS(ctls))
	defer tc.Close()
	sctx, cancel := context.WithTimeout(ctx, scaleTimeout)
	defer cancel()
	st, err := tc.Status(sctx)
	if err != nil {
		return st, fmt.Errorf("yarnclient: the job of application %s: %w", id, err)
	}
	if err := tc.Scale(sctx, servers, workers); err != nil {
		return st, fmt.Errorf("yarnclient: the job of application %s: %w", id, err)
	}
	return st, nil
}

// stagedKeys reads the tasks' keys file (the job's secret and the
// tracker's certificate) from application id's staging directory.
func stagedKeys(ctx context.Context, hcl *hadoopClient, id yarn.ApplicationID) (*conf.JobKeys, error) {
	resolver := hcl.resolver()
	defer resolver.Close()
	fsys, dir, err := resolver.Resolve(ctx, stagingURI(hcl.user, id))
	if err != nil {
		return nil, fmt.Errorf("yarnclient: staging directory of %s: %w", id, err)
	}
	name := path.Join(dir, conf.JobKeysFile)
	f, err := fsys.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("yarnclient: the keys of application %s (submitted by another user, or not by ps-submit?): %w", id, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeysFile+1))
	if err == nil && len(b) > maxKeysFile {
		err = errors.New("larger than 1 MiB")
	}
	if err != nil {
		return nil, fmt.Errorf("yarnclient: %s: %w", fsys.URI(name), err)
	}
	return conf.ParseJobKeys(fsys.URI(name), b)
}
