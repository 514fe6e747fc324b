package yarnclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

// askTimeout bounds the request that asks a job's tracker to end the job.
const askTimeout = 10 * time.Second

// askJobToEnd asks the job of application r, through its tracker and with
// the job's keys, to end KILLED for reason. Its ApplicationMaster then
// stops the tasks, keeps their output and the job's final status beside
// the logs (LogsURI) and unregisters: a kill by the ResourceManager,
// which stops the ApplicationMaster's container at once, leaves it no
// time for that. It fails when the application is not running its job
// or the tracker does not take the request.
func askJobToEnd(ctx context.Context, r yarn.ApplicationReport, keys *conf.JobKeys, reason string) error {
	if r.State != yarn.AppRunning || r.RPCPort <= 0 || r.Host == "" || r.Host == "N/A" {
		return fmt.Errorf("yarnclient: application %s is %v, not running its job", r.ID, r.State)
	}
	if keys == nil {
		return errors.New("yarnclient: no keys of the job")
	}
	ctls, err := keys.ClientTLS()
	if err != nil {
		return fmt.Errorf("yarnclient: keys of application %s: %w", r.ID, err)
	}
	tc := tracker.NewClient(net.JoinHostPort(r.Host, strconv.Itoa(int(r.RPCPort))), keys.Secret, tracker.WithTLS(ctls))
	defer tc.Close()
	actx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	if err := tc.Kill(actx, reason); err != nil {
		return fmt.Errorf("yarnclient: ask the job of application %s to end: %w", r.ID, err)
	}
	return nil
}

// waitEnded asks for reports every poll until one is terminal, which it
// returns with true, or ctx ends: then it returns the last report it got
// (last when none) with false. Failed reports are asked again.
func waitEnded(ctx context.Context, report func(context.Context) (yarn.ApplicationReport, error), last yarn.ApplicationReport, poll time.Duration) (yarn.ApplicationReport, bool) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		if r, err := report(ctx); err == nil {
			last = r
			if r.State.Terminal() {
				return r, true
			}
		}
		select {
		case <-ctx.Done():
			return last, false
		case <-tick.C:
		}
	}
}

// half is half of what remains of ctx, or 30 s when it has no deadline:
// how long an application asked to end is waited for before it is killed.
func half(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d) / 2
	}
	return 30 * time.Second
}
