package psnode

import (
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// Stalls. Heartbeats tell a process that is gone or cut off from one that
// runs; they cannot tell a program that runs from one hung in its own
// code (a deadlock, a wait on something that never comes), whose node
// goes on answering heartbeats while the others wait for it for ever.
// What waits for a node knows it does: the scheduler's barriers, and the
// servers of synchronous and bounded-delay tables, which hold the
// requests of the workers ahead until the others catch up. When such a
// wait has lasted conf.PS.StallTimeout, the node it waits for is
// reported stalled (NodeStalled), once per wait, and a launcher stops
// its process and starts it again (feed.StartNode): the job goes on as
// after any failure of that node, instead of waiting for ever. (In the
// free modes the workers meet only at the tracker, which finds a worker
// that holds the epoch's last shards itself: tracker.State.StalledShards.)

// stallCheckEvery is how often a table's server looks for a stalled
// worker, for a stall timeout of limit.
func stallCheckEvery(limit time.Duration) time.Duration {
	return min(max(limit/10, 50*time.Millisecond), 10*time.Second)
}

// barrierStallsLocked reports, on the scheduler, each server or worker a
// barrier has waited for conf.PS.StallTimeout or longer: a member that has
// not arrived that long after the first of its role did. The others of
// its role count, not the others: the servers wait at the last barrier
// (Tables.Finish) while the workers train. n.mu must be held.
func (n *Node) barrierStallsLocked(now time.Time) {
	limit := n.cfg.StallTimeout
	if limit <= 0 {
		return
	}
	for group, arr := range n.arrived {
		if len(arr) == 0 {
			continue
		}
		for _, id := range n.groupMembers(group) {
			nd, ok := n.table[id]
			if _, in := arr[id]; in || !ok || n.left[id] {
				continue
			}
			if since := n.arrivedAt[group][nd.Role]; !since.IsZero() && now.Sub(since) >= limit {
				n.stallLocked(id, since, now, fmt.Sprintf("a barrier waited %v for it, with %d of its nodes there", now.Sub(since).Round(time.Second), len(arr)))
			}
		}
	}
}

// watchStalls looks, every stallCheckEvery, for the workers a table's
// server waits for (blockers: of the live workers members, those the
// oldest request it holds waits for, and since when that request came),
// and reports each once that wait has lasted conf.PS.StallTimeout, until
// n closes; with a timeout of 0, it does nothing.
func (n *Node) watchStalls(table string, blockers func(members []int32) (time.Time, []int32)) {
	limit := n.cfg.StallTimeout
	if limit <= 0 {
		return
	}
	n.goFunc(func() {
		n.every(stallCheckEvery(limit), func() {
			n.mu.Lock()
			members := n.groupMembers(transport.WorkerGroup)
			n.mu.Unlock()
			since, ids := blockers(members)
			now := time.Now()
			if len(ids) == 0 || now.Sub(since) < limit {
				return
			}
			n.mu.Lock()
			for _, id := range ids {
				n.stallLocked(id, since, now, fmt.Sprintf("table %s on server %d held a request %v for it", table, n.me.Rank, now.Sub(since).Round(time.Second)))
			}
			n.mu.Unlock()
		})
	})
}

// stallLocked reports node id, a live server or worker, as holding up
// the others since since (what says how), unless it was reported for that
// wait already. n.mu must be held.
func (n *Node) stallLocked(id int32, since, now time.Time, what string) {
	nd, ok := n.table[id]
	if _, dead := n.dead[id]; dead || !ok || nd.Role == transport.RoleScheduler || !n.stalled[id].Before(since) {
		return
	}
	n.stalled[id] = since
	n.log.WithFields(logrus.Fields{"peer": nd.Addr(), "peer_id": id, "peer_role": nd.Role.String(), "peer_rank": nd.Rank, "waited": now.Sub(since).Round(time.Millisecond).String()}).
		Warn("node stalled: " + what)
	n.emit(Event{Kind: NodeStalled, Node: nd, Reason: what, Silent: now.Sub(since)})
}

// blockers returns, of members (the live workers), those the synchronous
// steps wait for, and since when: the workers that owe a part of the
// oldest step not applied, from the arrival of its oldest part a live
// worker waits on; with no step pending, those that have not said they
// are done with an epoch others are done with.
func (h *SyncHandler[V]) blockers(members []int32) (time.Time, []int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int32
	first, found := int32(0), false
	for cmd := range h.steps {
		if !found || cmd < first {
			first, found = cmd, true
		}
	}
	if found {
		st := h.steps[first]
		epoch, step := int(first>>syncStepBits), int(first&MaxSyncSteps)
		var since time.Time
		for id, p := range st.parts {
			if st.reqs[id] != nil && (since.IsZero() || p.at.Before(since)) {
				since = p.at
			}
		}
		if since.IsZero() {
			return since, nil // only dead processes' parts: nobody waits
		}
		for _, id := range members {
			_, sent := st.reqs[id]
			j, rejoined := h.joined[id]
			if !sent && h.done[epoch][id] == nil && !h.absent[id] && !(rejoined && j.epoch == epoch && step < j.step) {
				out = append(out, id)
			}
		}
		return since, out
	}
	epoch, found := 0, false
	for e, d := range h.done {
		for _, r := range d {
			if !h.gone[r] && (!found || e < epoch) {
				epoch, found = e, true
			}
		}
	}
	if !found {
		return time.Time{}, nil
	}
	for _, id := range members {
		if h.done[epoch][id] == nil && !h.absent[id] {
			out = append(out, id)
		}
	}
	return h.doneAt[epoch], out
}

// blockers returns, of members (the live workers), those the oldest held
// pull waits for that have not pushed since it came, and when it came: a
// worker that pushes is slow, not stalled.
func (h *SSPHandler[V]) blockers(members []int32) (time.Time, []int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.waiting) == 0 {
		return time.Time{}, nil
	}
	p := h.waiting[0] // held in the order they came
	need := p.at.step - h.staleness
	var out []int32
	for _, id := range members {
		w := h.clocks[id]
		if h.dead[id] {
			continue
		}
		behind := w == nil || sspAhead(w.epoch, p.at.epoch) == 3 || (sspAhead(w.epoch, p.at.epoch) == 0 && !w.idle && w.steps < need)
		if behind && (w == nil || w.ticked.Before(p.since)) {
			out = append(out, id)
		}
	}
	return p.since, out
}
