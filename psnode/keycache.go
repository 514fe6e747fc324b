package psnode

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// Key caching (TableSpec.KeyCache, which implies Compress; WithKeyCache).
// A worker usually sends the same key list twice in a row, the pull of a
// batch and its push. A server keeps, per worker, the key lists the
// worker asked it to keep (the keys frame's store bit), up to
// DefaultKeyCacheBytes, and forgets the least recently used first. The
// worker mirrors each server's cache of its lists (signatures and sizes,
// with the same budget and the same rule) and sends a reference, the
// list's length and signature, instead of a list the server should still
// have. A server that does not have it (it forgot the list, started
// again, or a message was lost) answers with a miss, and the worker sends
// the request again with the list written out; a handler never sees a
// request with an unresolved reference.
//
// A list's signature is the first 16 bytes of the SHA-256 of its
// little-endian bytes. The server computes the signature of every list it
// keeps from the keys it received, never trusting one sent to it, and a
// reference resolves only to a list of the same length and signature. A
// wrong list would need two different key lists of the same length from
// one worker with the same 128-bit truncated SHA-256: for the 2^40 lists
// of a very long job a chance below 2^-48 by the birthday bound, and no
// peer can make one on purpose.

// DefaultKeyCacheBytes is the key lists a server keeps per worker (and a
// worker's mirror of them per server), 8 bytes a key plus 64 a list.
const DefaultKeyCacheBytes = 32 << 20

// minCacheKeys is the shortest list worth keeping: a reference takes
// about 18 bytes.
const minCacheKeys = 8

// statusKeyMiss is the status of a server's answer to a request whose
// key list reference it cannot resolve: the worker sends the list.
const statusKeyMiss int32 = 2

// keySig identifies a key list: its length and the first 16 bytes of the
// SHA-256 of its little-endian bytes.
type keySig struct {
	h [16]byte
	n int
}

func sigOf(keys []uint64) keySig {
	sum := sha256.Sum256(asBytes(keys))
	s := keySig{n: len(keys)}
	copy(s.h[:], sum[:16])
	return s
}

// appendKeyRef appends a keys frame's contents referring to the list of
// signature s.
func appendKeyRef(dst []byte, s keySig) []byte {
	dst = append(dst, keysRef)
	dst = binary.AppendUvarint(dst, uint64(s.n))
	return append(dst, s.h[:]...)
}

// cacheCost is what a list of n keys costs in a key cache's budget, on
// the server and in the worker's mirror alike.
func cacheCost(n int) int { return 8*n + 64 }

// keyLRU is a key cache: a server's (with the lists) or a worker's mirror
// of it (signatures only), keeping at most budget bytes (cacheCost) and
// forgetting the least recently used list first. It is not safe for
// concurrent use.
type keyLRU struct {
	budget, used int
	order        list.List // of *lruEntry, most recent first
	bySig        map[keySig]*list.Element
}

type lruEntry struct {
	sig  keySig
	keys []uint64 // nil in a mirror
}

func newKeyLRU(budget int) *keyLRU {
	return &keyLRU{budget: budget, bySig: make(map[keySig]*list.Element)}
}

// cacheable reports whether a list of n keys may be kept.
func (c *keyLRU) cacheable(n int) bool { return n >= minCacheKeys && cacheCost(n) <= c.budget }

// get returns the entry of s, marking it used.
func (c *keyLRU) get(s keySig) (*lruEntry, bool) {
	e, ok := c.bySig[s]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry), true
}

// add keeps the list of s (keys nil in a mirror), forgetting the least
// recently used lists to make room; a list kept already is marked used.
func (c *keyLRU) add(s keySig, keys []uint64) {
	if _, ok := c.get(s); ok || !c.cacheable(s.n) {
		return
	}
	cost := cacheCost(s.n)
	for c.used+cost > c.budget {
		last := c.order.Back()
		le := last.Value.(*lruEntry)
		c.order.Remove(last)
		delete(c.bySig, le.sig)
		c.used -= cacheCost(le.sig.n)
	}
	c.bySig[s] = c.order.PushFront(&lruEntry{sig: s, keys: keys})
	c.used += cost
}

// keyCaches are key caches by peer: a worker's mirrors by server, or a
// server's caches by worker.
type keyCaches struct {
	mu     sync.Mutex
	budget int
	peers  map[int32]*keyLRU
}

func newKeyCaches(budget int) *keyCaches {
	return &keyCaches{budget: budget, peers: make(map[int32]*keyLRU)}
}

func (k *keyCaches) peerLocked(id int32) *keyLRU {
	c := k.peers[id]
	if c == nil {
		c = newKeyLRU(k.budget)
		k.peers[id] = c
	}
	return c
}

// encode writes the keys frame of a request to server: a reference when
// the server should keep the list, else the list with the store bit (and
// the mirror notes it); ref says which.
func (k *keyCaches) encode(server int32, keys []uint64) (frame []byte, ref bool) {
	s := sigOf(keys)
	k.mu.Lock()
	c := k.peerLocked(server)
	if _, ok := c.get(s); ok {
		k.mu.Unlock()
		return appendKeyRef(nil, s), true
	}
	store := c.cacheable(s.n)
	if store {
		c.add(s, nil)
	}
	k.mu.Unlock()
	return appendKeys(make([]byte, 0, 2*len(keys)+16), keys, store), false
}

// store writes the keys frame of a request to server with the list
// written out and the store bit, and notes it in the mirror: after a
// miss.
func (k *keyCaches) store(server int32, keys []uint64) []byte {
	s := sigOf(keys)
	k.mu.Lock()
	k.peerLocked(server).add(s, nil)
	k.mu.Unlock()
	return appendKeys(make([]byte, 0, 2*len(keys)+16), keys, true)
}

// resolve applies a received keys frame of worker to the server's cache:
// it keeps a list asked to be kept, and returns the list a reference
// names (a copy, for the handler to keep if it likes) or ok false.
func (k *keyCaches) resolve(worker int32, f keysFrame) (keys []uint64, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.peerLocked(worker)
	switch {
	case f.ref:
		e, found := c.get(f.sig)
		if !found {
			return nil, false
		}
		return append([]uint64(nil), e.keys...), true
	case f.store:
		c.add(sigOf(f.keys), append([]uint64(nil), f.keys...))
	}
	return f.keys, true
}
