package yarn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ps/spindle/internal/hadoop/hrpc"
	pb "github.com/spindle-ps/spindle/yarn/internal/proto"
)

// ContainerManagementProtocol is the RPC protocol of a NodeManager's
// ContainerManager port.
const ContainerManagementProtocol = "org.apache.hadoop.yarn.api.ContainerManagementProtocolPB"

// NMTokenSource gives the NMToken for a NodeManager; *AMClient is one.
type NMTokenSource interface {
	NMToken(node NodeID) (Token, bool)
}

// ErrNoNMToken is returned when no NMToken is known for a container's node.
var ErrNoNMToken = errors.New("yarn: no NMToken for node")

// NMClient starts, stops and inspects containers on NodeManagers, each
// connection authenticated with the node's NMToken. It keeps one
// connection per node, replaced when it fails or a newer NMToken arrives.
// It is safe for concurrent use.
type NMClient struct {
	tokens NMTokenSource

	mu     sync.Mutex // guards the fields below; never held while dialling
	conns  map[NodeID]*nmConn
	closed bool
}

type nmConn struct {
	conn  *hrpc.Conn
	ident []byte // identifier of the NMToken it authenticated with
}

// NewNMClient returns a client that takes NMTokens from tokens.
func NewNMClient(tokens NMTokenSource) *NMClient {
	return &NMClient{tokens: tokens, conns: map[NodeID]*nmConn{}}
}

// Close closes every connection. It is idempotent.
func (c *NMClient) Close() error {
	c.mu.Lock()
	conns := c.conns
	c.conns, c.closed = map[NodeID]*nmConn{}, true
	c.mu.Unlock()
	for _, nc := range conns {
		nc.conn.Close()
	}
	return nil
}

func (c *NMClient) connection(ctx context.Context, node NodeID) (*hrpc.Conn, error) {
	tok, ok := c.tokens.NMToken(node)
	if !ok {
		return nil, fmt.Errorf("%w %v", ErrNoNMToken, node)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if nc := c.conns[node]; nc != nil && nc.conn.Err() == nil && bytes.Equal(nc.ident, tok.Identifier) {
		c.mu.Unlock()
		return nc.conn, nil
	}
	c.mu.Unlock()

	conn, err := hrpc.Dial(ctx, node.String(), hrpc.Options{
		Protocol:        ContainerManagementProtocol,
		Auth:            hrpc.AuthToken,
		TokenIdentifier: tok.Identifier,
		TokenPassword:   tok.Password,
	})
	if err != nil {
		return nil, fmt.Errorf("yarn: connect to node manager %v: %w", node, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		conn.Close()
		return nil, ErrClosed
	}
	if old := c.conns[node]; old != nil {
		old.conn.Close() // no-op if it had failed; calls in flight on it fail with ErrClosed
	}
	c.conns[node] = &nmConn{conn: conn, ident: tok.Identifier}
	return conn, nil
}

func (c *NMClient) call(ctx context.Context, node NodeID, method string, req, resp proto.Message) error {
	conn, err := c.connection(ctx, node)
	if err != nil {
		return err
	}
	return wrapErr(method, conn.Call(ctx, method, req, resp))
}

// containerFailure turns the first per-container failure in a response
// into an error, or returns nil.
func containerFailure(method string, id ContainerID, failed []*pb.ContainerExceptionMapProto) error {
	if len(failed) == 0 {
		return nil
	}
	e := failed[0].GetException()
	return &RemoteError{Method: method, Class: e.GetClassName(), Message: id.String() + ": " + e.GetMessage()}
}

// StartContainer starts the allocated container ct on its NodeManager with
// the given launch context. A per-container failure the NodeManager
// reports (in an otherwise successful call) is returned as a *RemoteError
// whose Message starts with the container id.
func (c *NMClient) StartContainer(ctx context.Context, ct Container, launch LaunchContext) error {
	clc, err := launchContextProto(launch)
	if err != nil {
		return err
	}
	req := &pb.StartContainersRequestProto{StartContainerRequest: []*pb.StartContainerRequestProto{{
		ContainerLaunchContext: clc,
		ContainerToken:         tokenProto(ct.Token),
	}}}
	resp := &pb.StartContainersResponseProto{}
	if err := c.call(ctx, ct.Node, "startContainers", req, resp); err != nil {
		return err
	}
	if err := containerFailure("startContainers", ct.ID, resp.GetFailedRequests()); err != nil {
		return err
	}
	if len(resp.GetSucceededRequests()) != 1 {
		return fmt.Errorf("yarn: startContainers %v: node manager reported neither success nor failure", ct.ID)
	}
	return nil
}

// StopContainer asks ct's NodeManager to stop it; its exit status becomes
// ExitKilledByAppMaster.
func (c *NMClient) StopContainer(ctx context.Context, ct Container) error {
	req := &pb.StopContainersRequestProto{ContainerId: []*pb.ContainerIdProto{containerIDProto(ct.ID)}}
	resp := &pb.StopContainersResponseProto{}
	if err := c.call(ctx, ct.Node, "stopContainers", req, resp); err != nil {
		return err
	}
	return containerFailure("stopContainers", ct.ID, resp.GetFailedRequests())
}

// ContainerStatus asks ct's NodeManager for its status.
func (c *NMClient) ContainerStatus(ctx context.Context, ct Container) (ContainerStatus, error) {
	req := &pb.GetContainerStatusesRequestProto{ContainerId: []*pb.ContainerIdProto{containerIDProto(ct.ID)}}
	resp := &pb.GetContainerStatusesResponseProto{}
	if err := c.call(ctx, ct.Node, "getContainerStatuses", req, resp); err != nil {
		return ContainerStatus{}, err
	}
	if err := containerFailure("getContainerStatuses", ct.ID, resp.GetFailedRequests()); err != nil {
		return ContainerStatus{}, err
	}
	for _, st := range resp.GetStatus() {
		if s := containerStatusFromProto(st); s.ID == ct.ID {
			return s, nil
		}
	}
	return ContainerStatus{}, fmt.Errorf("yarn: getContainerStatuses %v: no status in response", ct.ID)
}
