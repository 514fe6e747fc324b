package psnode

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// SimpleRequest is a request received by a SimpleApp's handler.
type SimpleRequest struct {
	Sender    int32
	Timestamp int32
	Head      int32
	Body      []byte
}

// SimpleResponse is one node's answer to a SimpleApp request.
type SimpleResponse struct {
	Sender int32
	Head   int32
	Body   []byte
}

// SimpleHandler answers a request with a head and body, or an error that
// the requester receives as a *RemoteError. It runs on the app's receive
// goroutine, one request at a time.
type SimpleHandler func(req SimpleRequest) (head int32, body []byte, err error)

// SimpleApp exchanges (head int, body bytes) requests and responses
// between nodes, as ps-lite's SimpleApp does. Every node of the job may
// run one per app id; requests go to a node id or to a group.
type SimpleApp struct {
	n       *Node
	c       *customer // responses to our requests
	h       *customer // requests to us; nil without a handler
	handler SimpleHandler

	mu        sync.Mutex
	responses map[int32][]SimpleResponse
}

// NewSimpleApp makes app appID on n. handler answers requests from other
// nodes; nil means this node only sends requests.
func NewSimpleApp(n *Node, appID, customerID int32, handler SimpleHandler) (*SimpleApp, error) {
	a := &SimpleApp{n: n, handler: handler, responses: make(map[int32][]SimpleResponse)}
	var err error
	a.c, err = n.newCustomer(appID, customerID, false, func(m *transport.Message) { a.c.reply(m) })
	if err != nil {
		return nil, err
	}
	if handler != nil {
		a.h, err = n.newCustomer(appID, customerID, true, a.serve)
		if err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (a *SimpleApp) serve(m *transport.Message) {
	head, body, err := a.handler(SimpleRequest{Sender: m.Meta.Sender, Timestamp: m.Meta.Timestamp, Head: m.Meta.Head, Body: m.Meta.Body})
	res := &transport.Message{Meta: transport.Meta{
		Recver:     m.Meta.Sender,
		AppID:      m.Meta.AppID,
		CustomerID: m.Meta.CustomerID,
		Timestamp:  m.Meta.Timestamp,
		SimpleApp:  true,
		Head:       head,
		Body:       body,
	}}
	if err != nil {
		res.Meta.Status = 1
		res.Meta.Head = 0
		res.Meta.Body = []byte(err.Error())
	}
	ctx, cancel := context.WithTimeout(a.n.ctx, 30*time.Second)
	defer cancel()
	if err := a.n.send(ctx, res); err != nil {
		a.n.log.WithError(err).WithField("peer", m.Meta.Sender).Warn("simple app response not sent")
	}
}

// Request sends (head, body) to node or group recv (every live member
// but this node) and returns the request's timestamp.
func (a *SimpleApp) Request(ctx context.Context, head int32, body []byte, recv int32) (int32, error) {
	peers, err := a.n.resolve(recv)
	if err != nil {
		return 0, err
	}
	var ts int32
	collect := func(peer int32, m *transport.Message) error {
		a.mu.Lock()
		a.responses[m.Meta.Timestamp] = append(a.responses[m.Meta.Timestamp], SimpleResponse{Sender: peer, Head: m.Meta.Head, Body: m.Meta.Body})
		a.mu.Unlock()
		return nil
	}
	ts = a.c.newRequest(peers, collect, nil, nil, nil)
	for _, p := range peers {
		m := &transport.Message{Meta: transport.Meta{
			Recver:     p,
			AppID:      a.c.app,
			CustomerID: a.c.id,
			Timestamp:  ts,
			Request:    true,
			SimpleApp:  true,
			Head:       head,
			Body:       body,
		}}
		if err := a.n.send(ctx, m); err != nil {
			a.c.fail(ts, err)
			return ts, err
		}
	}
	return ts, nil
}

// Wait blocks until request ts has every answer, and returns them sorted
// by sender. The answers are forgotten once returned.
func (a *SimpleApp) Wait(ctx context.Context, ts int32) ([]SimpleResponse, error) {
	err := a.c.wait(ctx, ts)
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil, err
	}
	a.mu.Lock()
	res := a.responses[ts]
	delete(a.responses, ts)
	a.mu.Unlock()
	sort.Slice(res, func(i, j int) bool { return res[i].Sender < res[j].Sender })
	return res, err
}

// Call is Request followed by Wait.
func (a *SimpleApp) Call(ctx context.Context, head int32, body []byte, recv int32) ([]SimpleResponse, error) {
	ts, err := a.Request(ctx, head, body, recv)
	if err != nil {
		a.mu.Lock()
		delete(a.responses, ts)
		a.mu.Unlock()
		return nil, err
	}
	return a.Wait(ctx, ts)
}

// resolve turns a node id or group into the live peers it names, without
// this node.
func (n *Node) resolve(recv int32) ([]int32, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.ready {
		return nil, ErrNotReady
	}
	if transport.IsGroup(recv) {
		var out []int32
		for _, id := range n.groupMembers(recv) {
			if id != n.me.ID {
				out = append(out, id)
			}
		}
		return out, nil
	}
	nd, ok := n.table[recv]
	if !ok {
		return nil, fmt.Errorf("psnode: no node %d in the table", recv)
	}
	if reason, d := n.dead[recv]; d {
		return nil, &DeadError{ID: recv, Role: nd.Role, Rank: int(nd.Rank), Reason: reason}
	}
	return []int32{recv}, nil
}
