package yarnam

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/tracker"
	"github.com/spindle-ps/spindle/yarn"
)

// Gang start. The servers' and workers' environment names the scheduler's
// node, so they can only start once the scheduler is placed; but their
// containers need not wait for that. When the scheduler of a run is
// started, the Cluster asks at once for a container for every server and
// worker too (reserve), and holds the containers that come before their
// launches (held), so that the whole gang is asked for in one go and a
// busy queue cannot leave early tasks waiting while the rest are still
// being asked for. The tasks themselves start training only when every
// one has registered (psnode's start), within their registration timeout,
// which RegisterTimeout derives from the allocation timeout. A scheduler
// started again alone, the others running on, is a launch like any
// other: the gang is asked for once per run, until StopAll. So is a
// server or worker started to join the running job when it scales out:
// it asks for one more container of its role; Stop gives it up if the
// job no longer needs it.

// registerMargin is what RegisterTimeout adds to the allocation timeout:
// the time a container takes to be localized and to start.
const registerMargin = 2 * time.Minute

// RegisterTimeout is the tasks' registration timeout
// (SPINDLE_REGISTER_TIMEOUT) for an AM whose launches wait at most
// allocation for a container: the last task of the gang may come that
// late, and no task's wait for it must expire first.
func RegisterTimeout(allocation time.Duration) time.Duration {
	if allocation <= 0 {
		allocation = DefaultAllocationTimeout
	}
	return allocation + registerMargin
}

// registerTimeoutEnv is the setting RegisterTimeout gives the tasks.
func registerTimeoutEnv(allocation time.Duration) string {
	return fmt.Sprintf("%s=%g", conf.EnvRegisterTimeout, RegisterTimeout(allocation).Seconds())
}

// reserveGangLocked asks, with the run's first scheduler launch l, for
// the containers of the rest of the job: of the servers and workers the
// run starts with (l.Servers, l.Workers: the job's, which scaling
// changes), else of the spec's. c.mu must be held.
func (c *Cluster) reserveGangLocked(l job.Launch) {
	servers, workers := l.Servers, l.Workers
	if workers == 0 {
		servers, workers = c.spec.NumServers, c.spec.NumWorkers
	}
	c.reserve[prioServer] = int32(servers)
	c.reserve[prioWorker] = int32(workers)
	c.gang = true
}

// takeReservedLocked accounts for a launch at prio that a reserved
// container was asked for. c.mu must be held.
func (c *Cluster) takeReservedLocked(prio int32) {
	if c.reserve[prio] > 0 {
		c.reserve[prio]--
	}
}

// holdLocked keeps ct, which no launch waits for, when a launch of its
// priority is still to come; it reports whether it did. c.mu must be held.
func (c *Cluster) holdLocked(ct yarn.Container) bool {
	if c.blacklist[ct.Node] || c.countHeldLocked(ct.Priority) >= c.reserve[ct.Priority] {
		return false
	}
	c.held = append(c.held, ct)
	return true
}

// matchHeldLocked gives held containers to the launches now waiting for
// them and returns those launches, to be placed. c.mu must be held.
func (c *Cluster) matchHeldLocked() []*launch {
	var place []*launch
	kept := c.held[:0]
	for _, ct := range c.held {
		ln := c.takePendingLocked(ct)
		if ln == nil {
			if c.blacklist[ct.Node] || c.waitingLocked(ct.Priority) {
				// Not for any launch that waits: give it back, they ask anew.
				c.releases = append(c.releases, ct.ID)
			} else {
				kept = append(kept, ct)
			}
			continue
		}
		ln.ct = ct
		c.starting[ln.l.ID] = ln
		place = append(place, ln)
	}
	clear(c.held[len(kept):])
	c.held = kept
	return place
}

// takePendingLocked removes and returns the first launch of ct's priority
// waiting for a container that may run on ct's node, or nil. c.mu must be
// held.
func (c *Cluster) takePendingLocked(ct yarn.Container) *launch {
	for i, ln := range c.pending {
		if ln.prio != ct.Priority || c.avoidLocked(ln, ct.Node) {
			continue
		}
		c.pending = append(c.pending[:i:i], c.pending[i+1:]...)
		return ln
	}
	return nil
}

// releaseHeldLocked gives back every held container and the reservation,
// so that the next run's scheduler asks for the gang again. c.mu must be
// held.
func (c *Cluster) releaseHeldLocked() {
	for _, ct := range c.held {
		c.releases = append(c.releases, ct.ID)
	}
	c.held = nil
	clear(c.reserve)
	c.gang = false
}

// countHeldLocked counts the held containers of priority p. c.mu must be
// held.
func (c *Cluster) countHeldLocked(p int32) int32 {
	n := int32(0)
	for _, h := range c.held {
		if h.Priority == p {
			n++
		}
	}
	return n
}

// waitingLocked reports whether a launch of priority p waits for a
// container. c.mu must be held.
func (c *Cluster) waitingLocked(p int32) bool {
	for _, ln := range c.pending {
		if ln.prio == p {
			return true
		}
	}
	return false
}

// avoidLocked reports whether ln should turn down a container on node:
// the node is blacklisted, or ln's task failed there and the cluster has
// other nodes; at most maxNodeRejects times per launch. c.mu must be
// held.
func (c *Cluster) avoidLocked(ln *launch, node yarn.NodeID) bool {
	if ln.rejects >= maxNodeRejects {
		return false
	}
	bad := c.bad[ln.l.Task]
	return c.blacklist[node] || bad[node] && c.nodes > int32(len(bad))
}

// maxPlaces bounds the hosts a worker ask names.
const maxPlaces = 20

// inputPlaces returns the hosts that store the most shards (at most
// maxPlaces) and their racks, for the workers' asks.
func inputPlaces(shards []tracker.Shard) (hosts, racks []string) {
	count := map[string]int{}
	var order []string
	for _, sh := range shards {
		for _, h := range sh.Hosts {
			if count[h] == 0 {
				order = append(order, h)
			}
			count[h]++
		}
		for _, r := range sh.Racks {
			if !slices.Contains(racks, r) && len(racks) < maxPlaces {
				racks = append(racks, r)
			}
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return count[order[a]] > count[order[b]] })
	return order[:min(len(order), maxPlaces)], racks
}

// SetInputPlaces makes the workers' asks name the hosts and racks that
// store the input, so that the scheduler prefers them (relaxing to any
// node after its locality delay).
func (c *Cluster) SetInputPlaces(hosts, racks []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hosts, c.racks = hosts, racks
}

// placeAsksLocked returns the asks by host and rack for count workers.
// c.mu must be held.
func (c *Cluster) placeAsksLocked(count int32) []yarn.Ask {
	var asks []yarn.Ask
	for _, places := range [][]string{c.hosts, c.racks} {
		for _, p := range places {
			asks = append(asks, yarn.Ask{Priority: prioWorker, Count: count, Resource: c.resource(prioWorker), Place: p})
		}
	}
	return asks
}
