package dfs

import "time"

// AESConns is the number of h's DataNode connections that negotiated
// AES-CTR streams after their SASL exchange.
func AESConns(h *HDFS) int64 { return h.aesConns.Load() }

// Sessions is the number of NameNode sessions h has made.
func Sessions(h *HDFS) int64 { return h.connects.Load() }

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

// MoveClock moves the clock h retires sessions by d forward.
func MoveClock(h *HDFS, d time.Duration) { h.clockSkew.Add(int64(d)) }
