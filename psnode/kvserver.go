package psnode

import (
	"context"
	"fmt"
	"time"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// KVMeta describes a KV request as the server's handler sees it.
type KVMeta struct {
	// Cmd is the worker's command (WithCmd), zero by default.
	Cmd        int32
	Push, Pull bool
	Sender     int32
	Timestamp  int32
	AppID      int32
	CustomerID int32

	filters int32 // the request's filters: its answer goes through them too
}

// KVRequest is one request received by a server. Keys, Vals and Lens
// alias the receive buffers: a handler that keeps them past its return
// must copy them. Large ones (4 MiB and more) may be the transport's own
// memory, which goes back to it when the handler returns: reading them
// later reads freed memory.
type KVRequest[V Number] struct {
	KVMeta
	KVPairs[V]
}

// Handler handles a request on the server. It runs on the app's receive
// goroutine, one request at a time, and must answer every request exactly
// once with Respond or RespondError, then or later, from any goroutine.
type Handler[V Number] func(req *KVRequest[V], srv *KVServer[V])

// KVServer is the server side of a KV app.
type KVServer[V Number] struct {
	n       *Node
	c       *customer
	handler Handler[V]
	keys    *keyCaches // the key lists workers asked this server to keep
	acks    riders     // answers to pushes waiting to ride on a later message
}

// NewKVServer makes the server side of app appID, handing every request
// to h. Create it before the node's Start returns on any worker, that is,
// right after Start on this server, so that no request finds it missing.
func NewKVServer[V Number](n *Node, appID int32, h Handler[V]) (*KVServer[V], error) {
	if h == nil {
		return nil, fmt.Errorf("psnode: app %d: nil handler", appID)
	}
	s := &KVServer[V]{n: n, handler: h, keys: newKeyCaches(DefaultKeyCacheBytes)}
	// The customer's goroutine may take a request (one that waited for
	// the app) before newCustomer returns; serve reads s.c once it is set.
	made := make(chan struct{})
	c, err := n.newCustomer(appID, 0, true, func(m *transport.Message) {
		<-made
		s.serve(m)
	})
	if err != nil {
		return nil, err
	}
	s.c = c
	close(made)
	// Requests may come with the transport's own receive buffers: the
	// handler keeps nothing of them past its return (see KVRequest).
	n.borrowing.Store(appID, struct{}{})
	return s, nil
}

func (s *KVServer[V]) serve(m *transport.Message) {
	s.acks.begin(ackKey{m.Meta.Sender, m.Meta.AppID, m.Meta.CustomerID})
	defer s.endServe()
	req := &KVRequest[V]{KVMeta: KVMeta{
		Cmd:        m.Meta.Head,
		Push:       m.Meta.Push,
		Pull:       m.Meta.Pull,
		Sender:     m.Meta.Sender,
		Timestamp:  m.Meta.Timestamp,
		AppID:      m.Meta.AppID,
		CustomerID: m.Meta.CustomerID,
		filters:    m.Meta.Filters,
	}}
	miss, err := readRequest(s.keys, m, &req.KVPairs)
	if miss {
		_ = s.respondMiss(req)
		return
	}
	if err != nil {
		_ = s.RespondError(s.n.ctx, req, err)
		return
	}
	s.handler(req, s)
}

// readRequest reads a request's frames into kv: decompressed, its key
// list resolved through keys, the server's caches of the workers' lists.
// miss reports a reference to a list the cache does not have.
func readRequest[V Number](keys *keyCaches, m *transport.Message, kv *KVPairs[V]) (miss bool, err error) {
	kf, err := decompressFrames(m)
	if err != nil {
		return false, err
	}
	if kf.ref || kf.store {
		list, ok := keys.resolve(m.Meta.Sender, kf)
		if !ok {
			return true, nil
		}
		m.Data[0] = asBytes(list)
	}
	return false, decodeRequest(m, kv)
}

// decodeRequest reads [keys] [vals] [lens] of a request, checking that
// they agree.
func decodeRequest[V Number](m *transport.Message, kv *KVPairs[V]) error {
	if len(m.Data) > 3 || (len(m.Data) == 0 && m.Meta.Push) {
		return fmt.Errorf("%w: %d data frames in a KV request", transport.ErrMalformed, len(m.Data))
	}
	if len(m.Data) == 0 {
		return nil
	}
	var err error
	if kv.Keys, err = fromBytes[uint64](m.Data[0]); err != nil {
		return err
	}
	if len(m.Data) > 1 {
		if err := checkElem[V](m, 1); err != nil {
			return err
		}
		if kv.Vals, err = fromBytes[V](m.Data[1]); err != nil {
			return err
		}
	}
	if len(m.Data) > 2 {
		if kv.Lens, err = fromBytes[int32](m.Data[2]); err != nil {
			return err
		}
	}
	if err := kv.check(m.Meta.Push); err != nil {
		return fmt.Errorf("%w: %v", transport.ErrMalformed, err)
	}
	return nil
}

// Respond answers req. For a pull, res holds the values of req.Keys in
// the same order (res.Keys may be nil: the worker knows its keys, and
// leaving them out saves a third of a float32 pull's bytes); for a push,
// res is empty. res's slices are sent without copying and must not change
// until Respond returns. An answer to a push given while a request is in
// the handler may wait to ride on a later message (riders.go).
func (s *KVServer[V]) Respond(ctx context.Context, req *KVRequest[V], res KVPairs[V]) error {
	if req.Push && !req.Pull && len(res.Keys) == 0 && len(res.Vals) == 0 && s.acks.hold(&req.KVMeta) {
		return nil
	}
	m := s.response(req)
	if req.Pull {
		shape := res
		if shape.Keys == nil {
			shape.Keys = req.Keys
		}
		if err := shape.check(true); err != nil {
			return err
		}
		m.Data = append(m.Data, asBytes(res.Keys), asBytes(res.Vals))
		m.Meta.DataTypes = append(m.Meta.DataTypes, transport.TypeUint64, typeOf[V]())
		if res.Lens != nil {
			m.Data = append(m.Data, asBytes(res.Lens))
			m.Meta.DataTypes = append(m.Meta.DataTypes, transport.TypeInt32)
		}
		if req.filters&filterCompress != 0 {
			if err := compressFrames(m, nil, req.filters&filterStored == 0); err != nil {
				return err
			}
		}
	}
	return s.send(ctx, m)
}

// respondMiss answers a request whose key list reference this server
// cannot resolve (keycache.go): the worker sends it again, written out.
func (s *KVServer[V]) respondMiss(req *KVRequest[V]) error {
	m := s.response(req)
	m.Meta.Status = statusKeyMiss
	return s.send(s.n.ctx, m)
}

// RespondError answers req with a failure; the worker's Wait returns a
// *RemoteError carrying err's text.
func (s *KVServer[V]) RespondError(ctx context.Context, req *KVRequest[V], err error) error {
	m := s.response(req)
	m.Meta.Status = 1
	m.Meta.Body = []byte(err.Error())
	return s.send(ctx, m)
}

func (s *KVServer[V]) response(req *KVRequest[V]) *transport.Message {
	return &transport.Message{Meta: transport.Meta{
		Recver:     req.Sender,
		AppID:      req.AppID,
		CustomerID: req.CustomerID,
		Timestamp:  req.Timestamp,
		Push:       req.Push,
		Pull:       req.Pull,
		Head:       req.Cmd,
	}}
}

// send sends m, with the answers to pushes that wait for its receiver.
func (s *KVServer[V]) send(ctx context.Context, m *transport.Message) error {
	s.acks.take(m)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return s.n.send(ctx, m)
}

// Node returns the node the server runs on.
func (s *KVServer[V]) Node() *Node { return s.n }
