package dfs

import "time"

// AESConns is the number of h's DataNode connections that negotiated
// AES-CTR streams after their SASL exchange.
func AESConns(h *HDFS) int64 { return h.aesConns.Load() }

// Sessions is the number of NameNode sessions h has made.
func Sessions(h *HDFS) int64 { return h.connects.Load() }

// OpenSessions is the number of NameNode sessions h keeps open: the
// current one and the retired ones open files still use.
func OpenSessions(h *HDFS) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// RetireAt is when h's current session stops taking new operations, by
// h's clock (zero: never, or no session).
func RetireAt(h *HDFS) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sess == nil {
		return time.Time{}
	}
	return h.sess.retireAt
}

// Now is the time by h's clock.
func Now(h *HDFS) time.Time { return h.now() }

// MoveClock moves the clock h retires sessions by d forward.
func MoveClock(h *HDFS, d time.Duration) { h.clockSkew.Add(int64(d)) }

// BreakReader closes the HDFS client's reader under f, an open file of an
// HDFS, as a DataNode's refusal would end it: its next read fails.
func BreakReader(f File) { f.(*hdfsFile).r.Close() }
