package psnode

import (
	"context"
	"errors"
	"fmt"

	"github.com/spindle-ps/spindle/psnode/transport"
)

// RawApp is an app whose messages follow a protocol of the program's own,
// neither request/response (SimpleApp) nor key-value (KVWorker): the
// collectives of package psnode/collective, for one. Its messages travel
// as requests of its app id, so that they reach it whichever node sends
// them, and it sees each one, in arrival order, on the app's goroutine.
type RawApp struct {
	n   *Node
	c   *customer
	app int32
}

// NewRawApp makes app appID on n (after Start); handle receives every
// data message sent to appID, from any node. handle runs on the app's
// goroutine and should not block: while the app's queue is full the
// node's receive loop waits. The message and its frames are handle's.
func NewRawApp(n *Node, appID int32, handle func(*transport.Message)) (*RawApp, error) {
	if handle == nil {
		return nil, errors.New("psnode: NewRawApp needs a handler")
	}
	a := &RawApp{n: n, app: appID}
	c, err := n.newCustomer(appID, 0, true, handle)
	if err != nil {
		return nil, err
	}
	a.c = c
	return a, nil
}

// Send sends m to node m.Meta.Recver as a message of the app (AppID and
// Request are set here) and returns the bytes handed to the transport,
// meta and data. m and its frames may be reused once Send returns,
// except with retransmission on (conf.PS.Resend): the node then keeps m
// until the peer acknowledges it, and m must not change meanwhile.
func (a *RawApp) Send(ctx context.Context, m *transport.Message) (int, error) {
	m.Meta.AppID = a.app
	m.Meta.Request = true
	m.Meta.Control = transport.Control{}
	n, err := a.n.sendCount(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("psnode: app %d: %w", a.app, err)
	}
	return n, nil
}

// Done is closed when the node closes.
func (a *RawApp) Done() <-chan struct{} { return a.n.ctx.Done() }
