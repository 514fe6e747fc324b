package psnode

// ForgetKeyLists makes s forget every key list workers asked it to keep,
// as a server started again would: for tests of the key cache's misses.
func ForgetKeyLists[V Number](s *KVServer[V]) { s.keys = newKeyCaches(DefaultKeyCacheBytes) }

// ReplicaApp is the app id of the servers' replication messages.
const ReplicaApp = replicaApp

// QueuedRequests returns how many requests wait in s's queue.
func QueuedRequests[V Number](s *KVServer[V]) int { return len(s.c.queue) }
