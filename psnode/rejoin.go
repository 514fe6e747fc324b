package psnode

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// The rejoin protocol: a worker of a synchronous job that died is replaced
// by a new process of the same rank (the launcher starts it; the
// scheduler gives it the dead node's id). Meanwhile the servers' steps go
// on without it (SyncHandler). The replacement calls Tables.Rejoin before
// it trains:
//
//  1. It probes every server (ctlRejoin, {"probe": true}). Each server
//     marks the dead process's requests as nobody's to answer (the parts
//     it received are applied with their steps all the same) and answers,
//     for every synchronous table, the running epoch, how many of the
//     dead worker's batches of it it received (or that the worker had
//     said it was done with the epoch), and the lowest step the
//     replacement may join at: none applied yet, and after the dead
//     process's last part.
//  2. The replacement goes on in the lowest running epoch, after the
//     furthest batch any server received: a batch whose push reached some
//     servers and not others before the death is not sent again, so no
//     key gets a batch twice (those that missed it go without).
//  3. It asks every server to let it push that batch as step J of the
//     epoch, J the highest of the servers' lowest steps, and the next
//     batches as the steps after. A server that has moved past J refuses
//     and says where it is; the replacement asks every server again with
//     the new J. The servers that accepted wait for its part from step J
//     on, which soon holds the others back, so the rounds end within a
//     few steps.
//
// A worker whose dead predecessor had ended the epoch (on any server: it
// sent every step) does not join the steps; it only ends the epoch again.
const ctlRejoin int32 = 2

// maxRejoinRounds bounds the join requests of step 3.
const maxRejoinRounds = 100

// rejoinRequest is the body of a ctlRejoin request: Steps gives, per
// synchronous table, the step to join at.
type rejoinRequest struct {
	// Tables are the synchronous tables the worker declared: a server
	// answers once it serves every one of them.
	Tables []string       `json:"tables,omitempty"`
	Probe  bool           `json:"probe,omitempty"`
	Epoch  int            `json:"epoch"`
	From   int            `json:"from"`
	Steps  map[string]int `json:"steps,omitempty"`
}

// SyncResume is where a replacement worker goes on (Tables.Rejoin):
// epoch Epoch, after the first Batches batches of the dead worker's share
// of it, which the servers received; Batches is AllBatches when every one
// was.
type SyncResume struct {
	Epoch, Batches int
}

// AllBatches is SyncResume.Batches when the dead worker had sent every
// batch of the epoch.
const AllBatches = -1

// serveRejoin answers a ctlRejoin request on a server.
func (ts *Tables) serveRejoin(req SimpleRequest) (int32, []byte, error) {
	var r rejoinRequest
	if err := json.Unmarshal(req.Body, &r); err != nil {
		return 0, nil, fmt.Errorf("tables: rejoin request %q: %w", req.Body, err)
	}
	inc, ok := ts.n.incarnation(req.Sender)
	if !ok {
		return 0, nil, fmt.Errorf("tables: rejoin request from unknown node %d", req.Sender)
	}
	ctx, cancel := context.WithTimeout(ts.n.ctx, ts.opts.IOTimeout)
	defer cancel()
	if err := ts.waitServed(ctx, r.Tables); err != nil {
		return 0, nil, fmt.Errorf("tables: rejoin: %w", err)
	}
	tables := ts.list()
	out := map[string]syncPlace{}
	for _, e := range tables {
		if e.srv == nil {
			continue
		}
		step, ok := r.Steps[e.desc.Name]
		if !r.Probe && !ok {
			continue
		}
		p, ok, err := e.srv.rejoin(req.Sender, inc, syncRejoin{Probe: r.Probe, Epoch: r.Epoch, Step: step, From: r.From})
		if err != nil {
			return 0, nil, fmt.Errorf("table %s: %w", e.desc.Name, err)
		}
		if ok {
			out[e.desc.Name] = p
		}
	}
	body, err := json.Marshal(out)
	return ctlRejoin, body, err
}

// rejoinCall sends r to every server and returns each one's answers, by
// table, checking that every server answered for every table of names.
func (ts *Tables) rejoinCall(ctx context.Context, r rejoinRequest, names []string) ([]map[string]syncPlace, error) {
	r.Tables = names
	body, _ := json.Marshal(r)
	res, err := ts.callServers(ctx, ctlRejoin, body)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]syncPlace, len(res))
	for i, a := range res {
		if err := json.Unmarshal(a.Body, &out[i]); err != nil {
			return nil, fmt.Errorf("server %d's answer: %w", a.Sender, err)
		}
		for _, name := range names {
			if _, ok := out[i][name]; !ok {
				return nil, fmt.Errorf("server %d does not serve synchronous table %s", a.Sender, name)
			}
		}
	}
	return out, nil
}

// Rejoin takes a worker that replaces a dead one (Self().IsRecovery) back
// into the steps of the job's synchronous tables, and returns where it
// goes on: the epoch, and the batches of its share of it to skip, which
// the dead worker's pushes reached. Its batches of that epoch then carry
// the steps it joined at: push and pull them with the feed's step numbers
// as usual (PushBatch, PullBatch), counting the skipped ones. ok is false
// when there is nothing to rejoin: not a replacement, or no synchronous
// table. Call it on a worker, after declaring every table and before
// training.
func (ts *Tables) Rejoin(ctx context.Context) (res SyncResume, ok bool, err error) {
	if ts.n.Role() != transport.RoleWorker {
		return res, false, ErrNotWorker
	}
	var names []string
	shifts := map[string]*atomic.Pointer[syncShift]{}
	for _, e := range ts.list() {
		if e.desc.Sync && e.shift != nil {
			names = append(names, e.desc.Name)
			shifts[e.desc.Name] = e.shift
		}
	}
	if !ts.n.Self().IsRecovery || len(names) == 0 {
		return res, false, nil
	}
	// A server answers control requests one at a time, after any
	// checkpoint it is writing: the same bound as that.
	ctx, cancel := context.WithTimeout(ctx, ts.opts.IOTimeout)
	defer cancel()
	places, err := ts.rejoinCall(ctx, rejoinRequest{Probe: true}, names)
	if err != nil {
		return res, false, fmt.Errorf("psnode: rejoin the synchronous steps: %w", err)
	}
	res.Epoch = -1
	for _, ps := range places {
		for _, p := range ps {
			if res.Epoch < 0 || p.Ended < res.Epoch {
				res.Epoch = p.Ended
			}
		}
	}
	steps := map[string]int{}
	for _, ps := range places {
		for name, p := range ps {
			if p.Ended > res.Epoch || p.Done {
				res.Batches = AllBatches
			}
			if res.Batches != AllBatches {
				res.Batches = max(res.Batches, p.Batches)
			}
			steps[name] = max(steps[name], p.Next)
		}
	}
	log := ts.n.log.WithFields(logrus.Fields{"epoch": res.Epoch, "batches_received": res.Batches})
	if res.Batches == AllBatches {
		log.Info("rejoined: the dead worker had sent every step of the epoch")
		return res, true, nil
	}
	for round := 0; round < maxRejoinRounds; round++ {
		places, err := ts.rejoinCall(ctx, rejoinRequest{Epoch: res.Epoch, From: res.Batches, Steps: steps}, names)
		if err != nil {
			return res, false, fmt.Errorf("psnode: rejoin epoch %d at steps %v: %w", res.Epoch, steps, err)
		}
		all := true
		for _, ps := range places {
			for name, p := range ps {
				if !p.Accepted {
					all = false
					steps[name] = max(steps[name], p.Next)
				}
			}
		}
		if all {
			for name, at := range steps {
				shifts[name].Store(&syncShift{epoch: res.Epoch, from: res.Batches, at: at})
			}
			log.WithField("steps", steps).Info("rejoined the synchronous steps")
			return res, true, nil
		}
	}
	return res, false, fmt.Errorf("psnode: rejoin epoch %d: the servers moved on in each of %d rounds", res.Epoch, maxRejoinRounds)
}

// syncShift maps a rejoined worker's batches of epoch to the steps it
// joined at: batch from is step at, and so on.
type syncShift struct{ epoch, from, at int }

// wireStep returns the step batch step of epoch is pushed and pulled as.
func (t *Table[V]) wireStep(epoch, step int) (int, error) {
	sh := t.shift.Load()
	if sh == nil || sh.epoch != epoch {
		return step, nil
	}
	if step < sh.from {
		return 0, fmt.Errorf("psnode: table %s: batch %d of epoch %d was sent before this worker rejoined at batch %d", t.desc.Name, step, epoch, sh.from)
	}
	return step - sh.from + sh.at, nil
}

// Sync returns a synchronous table's handler on a server, nil elsewhere.
func (t *Table[V]) Sync() *SyncHandler[V] { return t.sync }
