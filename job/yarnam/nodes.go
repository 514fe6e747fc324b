package yarnam

import (
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/yarn"
)

// lostExit reports whether a container that ended with status code was
// taken away by YARN rather than failing on its own: preempted, lost with
// its node or its disks, or killed by the ResourceManager. Such a launch
// does not use up its task's attempts (job.Exit.Lost) and does not count
// against its node.
func lostExit(code int32) bool {
	switch code {
	case yarn.ExitAborted, yarn.ExitDisksFailed, yarn.ExitPreempted, yarn.ExitKilledByResourceManager:
		return true
	}
	return false
}

// BlacklistNode adds node, a NodeManager's host:port as the Placed event
// names it (job.Event.NodeID), to the application's blacklist at the next
// heartbeat, and from then on releases containers that come on it (at
// most a few times per launch, in case the ResourceManager names nodes
// otherwise). It refuses when the cluster would be left without a node
// that is not blacklisted.
//
// YARN's blacklist names a node by its host, or by host:port where the
// ResourceManager includes ports in node names; the AM sends host:port
// when Options.NodeNamesWithPort says so or it has seen more than one
// NodeManager on the host, the host otherwise.
func (c *Cluster) BlacklistNode(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var id yarn.NodeID
	for n := range c.seen {
		if n.String() == node {
			id = n
		}
	}
	if id.Host == "" {
		c.log.WithField("node", node).Warn("asked to blacklist a node this AM has no container on")
		return false
	}
	if c.blacklist[id] {
		return true
	}
	if int32(len(c.blacklist)+1) >= c.nodes {
		return false
	}
	c.blacklist[id] = true
	name := id.Host
	for n := range c.seen {
		if n.Host == id.Host && n != id || c.opts.NodeNamesWithPort {
			name = id.String()
		}
	}
	c.blAdd = append(c.blAdd, name)
	c.log.WithFields(logrus.Fields{"node": node, "blacklist_name": name}).Warn("adding the node to the application's blacklist")
	return true
}

// Blacklisted lists the nodes given to YARN's blacklist, as host:port,
// sorted.
func (c *Cluster) Blacklisted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for n := range c.blacklist {
		out = append(out, n.String())
	}
	slices.Sort(out)
	return out
}
