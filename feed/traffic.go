package feed

import "github.com/spindle-ps/spindle/psnode"

// The epoch metrics of a worker's table traffic: bytes on the wire of its
// pushes and pulls to the servers, and of the servers' answers, meta and
// data frames. Summed over the workers they are the job's traffic
// between the two roles in the epoch.
const (
	MetricBytesToServers   = "bytes_to_servers_sum"
	MetricBytesFromServers = "bytes_from_servers_sum"
)

// AddTraffic adds to m the traffic between two readings of
// psnode.Tables.Bytes on a worker.
func AddTraffic(m map[string]float64, from, to psnode.AppBytes) {
	m[MetricBytesToServers] = float64(to.Sent - from.Sent)
	m[MetricBytesFromServers] = float64(to.Received - from.Received)
}
