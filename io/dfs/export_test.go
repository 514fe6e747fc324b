package dfs

// AESConns is the number of h's DataNode connections that negotiated
// AES-CTR streams after their SASL exchange.
func AESConns(h *HDFS) int64 { return h.aesConns.Load() }
