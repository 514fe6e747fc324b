package psnode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/spindle-ps/spindle/psnode/partition"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// KVPairs is a batch of keys with their values: Keys sorted ascending and
// unique; Vals holds a fixed number of values per key (len(Vals) a
// multiple of len(Keys)) or, when Lens is set, Lens[i] values for key i.
type KVPairs[V Number] struct {
	Keys []uint64
	Vals []V
	Lens []int32
}

// check verifies the shape of kv (not the key order: the partitioner
// checks that while splitting).
func (kv *KVPairs[V]) check(withVals bool) error {
	if kv.Lens != nil {
		if len(kv.Lens) != len(kv.Keys) {
			return fmt.Errorf("psnode: %d lens for %d keys", len(kv.Lens), len(kv.Keys))
		}
		total := 0
		for i, l := range kv.Lens {
			if l < 0 {
				return fmt.Errorf("psnode: negative len %d for key %d", l, kv.Keys[i])
			}
			total += int(l)
		}
		if withVals && total != len(kv.Vals) {
			return fmt.Errorf("psnode: lens add up to %d values but %d were given", total, len(kv.Vals))
		}
		return nil
	}
	if withVals && len(kv.Keys) > 0 && (len(kv.Vals) == 0 || len(kv.Vals)%len(kv.Keys) != 0) {
		return fmt.Errorf("psnode: %d values for %d keys: want a whole number per key, or lens", len(kv.Vals), len(kv.Keys))
	}
	return nil
}

// CallOption sets an option of one push or pull.
type CallOption func(*callOpts)

type callOpts struct {
	cmd        int32
	callback   func(error)
	allServers bool
	pulled     func() // after a pull's values are in place, before Wait returns
}

// afterPull sets a function called once a pull's values are in place,
// on the app's receive goroutine, before Wait returns.
func afterPull(f func()) CallOption { return func(o *callOpts) { o.pulled = f } }

// ToAllServers sends the request to every server, also those that own
// none of its keys (they get an empty request), as a synchronous step
// needs: each server waits for every worker's part of a step.
func ToAllServers() CallOption { return func(o *callOpts) { o.allServers = true } }

// WithCmd sets the command (ps-lite's cmd, carried in the message head)
// that the server's handler receives.
func WithCmd(cmd int32) CallOption { return func(o *callOpts) { o.cmd = cmd } }

// WithCallback sets a function called once when the request completes,
// with its error. It runs on the app's receive goroutine: it must not
// block.
func WithCallback(f func(error)) CallOption { return func(o *callOpts) { o.callback = f } }

// KVWorker pushes values to and pulls values from the servers that own
// their keys. Its methods are safe for concurrent use.
type KVWorker[V Number] struct {
	n        *Node
	c        *customer
	route    atomic.Pointer[kvRoute] // replaced when the job changes its servers
	compress bool
	stored   bool       // with compress: frames stored, not through zstd (WithDeltaKeys)
	keyCache *keyCaches // mirrors of the servers' key caches
	width    int        // a table's values per key, which every answer must carry; 0: any
}

// WorkerOption sets an option of a KVWorker.
type WorkerOption func(*workerOpts)

type workerOpts struct {
	part     partition.Partitioner
	compress bool
	stored   bool
	keyCache bool
	width    int
}

// withWidth makes a table's pulls fail when a server answers with other
// than width values per key: a server that declares the table otherwise.
func withWidth(width int) WorkerOption { return func(o *workerOpts) { o.width = width } }

// WithKeyCache compresses like WithCompression and, in addition, asks the
// servers to keep the key lists it sends and refers to a kept list by
// its signature instead of sending it again (see keycache.go).
func WithKeyCache() WorkerOption {
	return func(o *workerOpts) { o.compress, o.keyCache = true, true }
}

// WithCompression compresses the data frames of every request and asks
// the servers to compress their answers (lossless: delta-encoded keys,
// zstd; see compress.go). Servers need no setting.
func WithCompression() WorkerOption {
	return func(o *workerOpts) { o.compress, o.stored = true, false }
}

// WithDeltaKeys sends the keys of every request as gaps (varints) and
// every other frame as it is, and asks the servers to answer the same
// way: lossless, like WithCompression, with fewer bytes saved but almost
// no CPU spent (no zstd). With WithKeyCache the key lists are kept too.
func WithDeltaKeys() WorkerOption {
	return func(o *workerOpts) { o.compress, o.stored = true, true }
}

// WithPartitioner replaces the partitioner the configuration names
// (SPINDLE_PARTITIONER, DMLC_MAX_DIMENSION). Every worker of an app must
// use the same one, with one part per server.
func WithPartitioner(p partition.Partitioner) WorkerOption {
	return func(o *workerOpts) { o.part = p }
}

// NewKVWorker makes the worker side of app appID for customer
// customerID. Call it after Start (it needs the node table).
func NewKVWorker[V Number](n *Node, appID, customerID int32, opts ...WorkerOption) (*KVWorker[V], error) {
	if !n.isReady() {
		return nil, ErrNotReady
	}
	servers := n.NumServers()
	if servers < 1 {
		return nil, errors.New("psnode: a KV worker needs at least one server")
	}
	var o workerOpts
	for _, f := range opts {
		f(&o)
	}
	part := o.part
	if part == nil {
		var err error
		if part, err = NewPartitioner(n.cfg.Partitioner, servers, n.cfg.MaxDimension); err != nil {
			return nil, err
		}
	}
	w := &KVWorker[V]{n: n, compress: o.compress, stored: o.stored, width: o.width}
	if err := w.setPartitioner(part, servers); err != nil {
		return nil, err
	}
	if o.keyCache {
		w.keyCache = newKeyCaches(DefaultKeyCacheBytes)
	}
	var err error
	w.c, err = n.newCustomer(appID, customerID, false, func(m *transport.Message) { w.c.reply(m) })
	if err != nil {
		return nil, err
	}
	if n.cfg.Replicas > 0 && n.cfg.NumServers > 1 {
		w.c.holdForReplicas()
	}
	return w, nil
}

// NewPartitioner returns the partitioner named kind ("range", "hash" or
// "consistent") over servers parts and the key space [0, maxKey) (0: all
// of uint64).
func NewPartitioner(kind string, servers int, maxKey uint64) (partition.Partitioner, error) {
	if kind == "" {
		kind = partition.KindRange
	}
	return partition.New(kind, servers, maxKey)
}

// kvRoute is how a KV worker sends keys: the partitioner, and the server
// id of each part.
type kvRoute struct {
	part    partition.Partitioner
	servers []int32
}

// setPartitioner routes the next requests with part, one part per server
// of servers.
func (w *KVWorker[V]) setPartitioner(part partition.Partitioner, servers int) error {
	if part.NumParts() != servers {
		return fmt.Errorf("psnode: partitioner has %d parts for %d servers", part.NumParts(), servers)
	}
	r := &kvRoute{part: part}
	for i := 0; i < servers; i++ {
		r.servers = append(r.servers, transport.ServerID(i))
	}
	w.route.Store(r)
	return nil
}

// Partitioner returns the partitioner that assigns keys to servers.
func (w *KVWorker[V]) Partitioner() partition.Partitioner { return w.route.Load().part }

// Push sends kv to the servers and returns the request's timestamp; Wait
// on it to learn when every server has applied it. kv's slices may be
// reused once Push returns: what is sent has been copied by then.
func (w *KVWorker[V]) Push(ctx context.Context, kv KVPairs[V], opts ...CallOption) (int32, error) {
	return w.request(ctx, kv, true, false, nil, nil, opts)
}

// Pull fetches the values of keys into *vals (and the per-key counts into
// *lens when lens is not nil), reusing their capacity. The slices are
// filled when Wait returns without error and must not be touched until
// then; keys may be reused once Pull returns.
func (w *KVWorker[V]) Pull(ctx context.Context, keys []uint64, vals *[]V, lens *[]int32, opts ...CallOption) (int32, error) {
	if vals == nil {
		return 0, errors.New("psnode: pull needs somewhere to put the values")
	}
	return w.request(ctx, KVPairs[V]{Keys: keys}, false, true, vals, lens, opts)
}

// PushPull pushes kv and pulls the same keys' values after the servers
// applied the push, in one round trip.
func (w *KVWorker[V]) PushPull(ctx context.Context, kv KVPairs[V], vals *[]V, lens *[]int32, opts ...CallOption) (int32, error) {
	if vals == nil {
		return 0, errors.New("psnode: pushpull needs somewhere to put the values")
	}
	return w.request(ctx, kv, true, true, vals, lens, opts)
}

// Wait blocks until request ts completes and returns its error: a
// server's handler error (*RemoteError), a dead server (ErrNodeDead), or
// ctx's.
func (w *KVWorker[V]) Wait(ctx context.Context, ts int32) error { return w.c.wait(ctx, ts) }

// reply holds one server's answer to a pull while the others arrive.
type reply[V Number] struct {
	vals []V
	lens []int32
}

func (w *KVWorker[V]) request(ctx context.Context, kv KVPairs[V], push, pull bool, vals *[]V, lens *[]int32, opts []CallOption) (int32, error) {
	var o callOpts
	for _, f := range opts {
		f(&o)
	}
	if err := kv.check(push); err != nil {
		return 0, err
	}
	// segs outlives this call (the reply handlers read it), so it is not
	// pooled.
	route := w.route.Load()
	segs, err := route.part.Split(kv.Keys, nil)
	if err != nil {
		return 0, fmt.Errorf("psnode: %w", err)
	}

	dim := 0
	if kv.Lens == nil && len(kv.Keys) > 0 {
		dim = len(kv.Vals) / len(kv.Keys)
	}
	offsets := kv.offsets()
	var peers []int32
	msgs := make([]*transport.Message, 0, len(segs))
	var replies []reply[V]
	if pull {
		replies = make([]reply[V], len(segs))
	}
	// build writes the request to server, with keys the keys frame's
	// contents when not nil (key caching).
	build := func(server int32, sub KVPairs[V], keys []byte) (*transport.Message, error) {
		m := &transport.Message{Meta: transport.Meta{
			Recver:     server,
			AppID:      w.c.app,
			CustomerID: w.c.id,
			Request:    true,
			Push:       push,
			Pull:       pull,
			Head:       o.cmd,
		}}
		m.Data = append(m.Data, asBytes(sub.Keys))
		m.Meta.DataTypes = append(m.Meta.DataTypes, transport.TypeUint64)
		if push {
			m.Data = append(m.Data, asBytes(sub.Vals))
			m.Meta.DataTypes = append(m.Meta.DataTypes, typeOf[V]())
			if sub.Lens != nil {
				m.Data = append(m.Data, asBytes(sub.Lens))
				m.Meta.DataTypes = append(m.Meta.DataTypes, transport.TypeInt32)
			}
		}
		if !w.compress {
			return m, nil
		}
		if keys != nil {
			m.Meta.Filters |= filterKeyCache
		}
		return m, compressFrames(m, keys, !w.stored)
	}
	// retry holds, for each server sent a reference to a key list, the
	// request's own copy, to send again written out on a miss.
	var retry map[int32]KVPairs[V]
	// owned: every frame is the request's own, none kv's memory
	// (customer.keep): compressed, or gathered by subset.
	owned := true
	for p, seg := range segs {
		sub := subset(kv, seg, dim, offsets, push)
		if len(sub.Keys) == 0 && !o.allServers {
			continue
		}
		owned = owned && (w.compress || seg.Idx != nil)
		server := route.servers[p]
		peers = append(peers, server)
		var keys []byte
		if w.keyCache != nil && len(sub.Keys) >= minCacheKeys {
			var ref bool
			if keys, ref = w.keyCache.encode(server, sub.Keys); ref {
				if retry == nil {
					retry = make(map[int32]KVPairs[V])
				}
				retry[server] = KVPairs[V]{Keys: slices.Clone(sub.Keys), Vals: slices.Clone(sub.Vals), Lens: slices.Clone(sub.Lens)}
			}
		}
		m, err := build(server, sub, keys)
		if err != nil {
			return 0, err
		}
		msgs = append(msgs, m)
	}
	var onMiss func(int32, int32) error
	if retry != nil {
		onMiss = func(server, ts int32) error {
			sub, ok := retry[server]
			if !ok {
				return fmt.Errorf("psnode: server %d misses a key list it was sent", server)
			}
			delete(retry, server) // written out, it cannot miss again
			m, err := build(server, sub, w.keyCache.store(server, sub.Keys))
			if err != nil {
				return err
			}
			m.Meta.Timestamp = ts
			if len(w.c.keep(ts, true, m)) == 0 { // retry's copies
				return nil // its replacement gets it (customer.peerBack)
			}
			ctx, cancel := context.WithTimeout(w.n.ctx, 30*time.Second)
			defer cancel()
			return w.n.send(ctx, m)
		}
	}
	var onReply func(int32, *transport.Message) error
	var finish func(error) error
	if pull {
		onReply = func(peer int32, m *transport.Message) error {
			p := transport.IDRank(peer) // server rank r owns part r
			if _, err := decompressFrames(m); err != nil {
				return fmt.Errorf("psnode: reply from server %d: %w", peer, err)
			}
			k := segLen(segs[p])
			r, err := decodeReply[V](m, k)
			if err != nil {
				return fmt.Errorf("psnode: reply from server %d: %w", peer, err)
			}
			if w.width > 0 && k > 0 && (r.lens != nil || len(r.vals) != k*w.width) {
				return fmt.Errorf("psnode: reply from server %d: %d values for %d keys, where the table has %d per key: every role must declare the table alike", transport.IDRank(peer), len(r.vals), k, w.width)
			}
			replies[p] = r
			return nil
		}
		finish = func(err error) error {
			if err != nil {
				return err
			}
			if err := assemble(len(kv.Keys), segs, replies, vals, lens); err != nil {
				return err
			}
			if o.pulled != nil {
				o.pulled()
			}
			return nil
		}
	}
	ts := w.c.newRequest(peers, onReply, finish, o.callback, onMiss)
	for _, m := range msgs {
		m.Meta.Timestamp = ts
	}
	// A server that is down gets its message from its replacement.
	for _, m := range w.c.keep(ts, owned, msgs...) {
		if err := w.n.send(ctx, m); err != nil {
			w.c.fail(ts, err)
			return ts, err
		}
	}
	return ts, nil
}

// offsets returns the start of each key's values when kv has lens.
func (kv *KVPairs[V]) offsets() []int {
	if kv.Lens == nil {
		return nil
	}
	off := make([]int, len(kv.Lens)+1)
	for i, l := range kv.Lens {
		off[i+1] = off[i] + int(l)
	}
	return off
}

func segLen(s partition.Segment) int {
	if s.Idx != nil {
		return len(s.Idx)
	}
	return s.Hi - s.Lo
}

// subset returns a part's share of kv: sub-slices of kv (no copy) for a
// contiguous segment, gathered copies for an index list.
func subset[V Number](kv KVPairs[V], seg partition.Segment, dim int, off []int, withVals bool) KVPairs[V] {
	if seg.Idx == nil {
		sub := KVPairs[V]{Keys: kv.Keys[seg.Lo:seg.Hi]}
		if withVals {
			if kv.Lens != nil {
				sub.Lens = kv.Lens[seg.Lo:seg.Hi]
				sub.Vals = kv.Vals[off[seg.Lo]:off[seg.Hi]]
			} else {
				sub.Vals = kv.Vals[seg.Lo*dim : seg.Hi*dim]
			}
		}
		return sub
	}
	sub := KVPairs[V]{Keys: make([]uint64, len(seg.Idx))}
	for j, i := range seg.Idx {
		sub.Keys[j] = kv.Keys[i]
	}
	if withVals {
		if kv.Lens != nil {
			sub.Lens = make([]int32, len(seg.Idx))
			for j, i := range seg.Idx {
				sub.Lens[j] = kv.Lens[i]
				sub.Vals = append(sub.Vals, kv.Vals[off[i]:off[i+1]]...)
			}
		} else {
			sub.Vals = make([]V, 0, len(seg.Idx)*dim)
			for _, i := range seg.Idx {
				sub.Vals = append(sub.Vals, kv.Vals[int(i)*dim:(int(i)+1)*dim]...)
			}
		}
	}
	return sub
}

// decodeReply reads a server's answer to a pull of nkeys keys: [keys]
// [vals] and optionally [lens].
func decodeReply[V Number](m *transport.Message, nkeys int) (reply[V], error) {
	var r reply[V]
	if len(m.Data) < 2 || len(m.Data) > 3 {
		return r, fmt.Errorf("%w: %d data frames, want keys, values and optional lens", transport.ErrMalformed, len(m.Data))
	}
	// The keys frame is empty when the server does not echo the keys (the
	// worker knows what it asked for), or holds exactly the keys asked.
	if len(m.Data[0]) != 0 && len(m.Data[0]) != 8*nkeys {
		return r, fmt.Errorf("%w: %d bytes of keys for %d keys asked", transport.ErrMalformed, len(m.Data[0]), nkeys)
	}
	if err := checkElem[V](m, 1); err != nil {
		return r, err
	}
	vals, err := fromBytes[V](m.Data[1])
	if err != nil {
		return r, err
	}
	r.vals = vals
	if len(m.Data) == 3 {
		lens, err := fromBytes[int32](m.Data[2])
		if err != nil {
			return r, err
		}
		if len(lens) != nkeys {
			return r, fmt.Errorf("%w: %d lens for %d keys", transport.ErrMalformed, len(lens), nkeys)
		}
		total := 0
		for _, l := range lens {
			if l < 0 {
				return r, fmt.Errorf("%w: negative len", transport.ErrMalformed)
			}
			total += int(l)
		}
		if total != len(vals) {
			return r, fmt.Errorf("%w: lens add up to %d but %d values came", transport.ErrMalformed, total, len(vals))
		}
		r.lens = lens
	} else if nkeys > 0 && len(vals)%nkeys != 0 {
		return r, fmt.Errorf("%w: %d values for %d keys", transport.ErrMalformed, len(vals), nkeys)
	}
	return r, nil
}

// assemble puts the servers' answers back in the order of the keys.
func assemble[V Number](nkeys int, segs []partition.Segment, replies []reply[V], vals *[]V, lens *[]int32) error {
	variable := false
	dim := -1
	for p, r := range replies {
		k := segLen(segs[p])
		if k == 0 {
			continue
		}
		if r.lens != nil {
			variable = true
			continue
		}
		d := len(r.vals) / k
		if dim >= 0 && d != dim {
			variable = true
		}
		dim = d
	}
	if nkeys == 0 {
		*vals = (*vals)[:0]
		if lens != nil {
			*lens = (*lens)[:0]
		}
		return nil
	}
	forEach := func(p int, f func(j, i int)) {
		s := segs[p]
		if s.Idx != nil {
			for j, i := range s.Idx {
				f(j, int(i))
			}
			return
		}
		for j := 0; j < s.Hi-s.Lo; j++ {
			f(j, s.Lo+j)
		}
	}
	if !variable {
		if dim < 0 {
			dim = 0
		}
		total := nkeys * dim
		out := grow(*vals, total)
		for p, r := range replies {
			if s := segs[p]; s.Idx == nil {
				copy(out[s.Lo*dim:s.Hi*dim], r.vals) // a contiguous part: one block
				continue
			}
			forEach(p, func(j, i int) { copy(out[i*dim:(i+1)*dim], r.vals[j*dim:(j+1)*dim]) })
		}
		*vals = out
		if lens != nil {
			l := grow(*lens, nkeys)
			for i := range l {
				l[i] = int32(dim)
			}
			*lens = l
		}
		return nil
	}
	if lens == nil {
		return errors.New("psnode: servers returned a varying number of values per key; pass lens to receive them")
	}
	kl := make([]int32, nkeys) // per-key lengths, in key order
	starts := make([][]int, len(replies))
	for p, r := range replies {
		k := segLen(segs[p])
		d := 0
		if k > 0 && r.lens == nil {
			d = len(r.vals) / k
		}
		st := make([]int, k+1)
		for j := 0; j < k; j++ {
			l := d
			if r.lens != nil {
				l = int(r.lens[j])
			}
			st[j+1] = st[j] + l
		}
		starts[p] = st
		forEach(p, func(j, i int) { kl[i] = int32(st[j+1] - st[j]) })
	}
	off := make([]int, nkeys+1)
	for i, l := range kl {
		off[i+1] = off[i] + int(l)
	}
	out := grow(*vals, off[nkeys])
	for p, r := range replies {
		st := starts[p]
		forEach(p, func(j, i int) { copy(out[off[i]:off[i+1]], r.vals[st[j]:st[j+1]]) })
	}
	*vals = out
	*lens = append(grow(*lens, 0), kl...)
	return nil
}

// grow returns s resized to n, reusing its capacity.
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}
