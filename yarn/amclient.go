package yarn

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/creds"
	"github.com/spindle-ps/spindle/internal/hadoop/hrpc"
	hpb "github.com/spindle-ps/spindle/internal/hadoop/proto"
	pb "github.com/spindle-ps/spindle/yarn/internal/proto"
	"github.com/spindle-ps/spindle/yarn/internal/tokenpb"
)

// ApplicationMasterProtocol is the RPC protocol of the ResourceManager's
// scheduler port.
const ApplicationMasterProtocol = "org.apache.hadoop.yarn.api.ApplicationMasterProtocolPB"

// Configuration keys and defaults for the scheduler port.
const (
	KeySchedulerAddress  = "yarn.resourcemanager.scheduler.address"
	DefaultSchedulerPort = 8030
)

// TokenFileEnv names the environment variable through which a NodeManager
// tells a container where its credentials file is.
const TokenFileEnv = creds.TokenFileEnv

// SchedulerAddress returns the ResourceManager's scheduler address
// (host:port) from hc: yarn.resourcemanager.scheduler.address, else
// yarn.resourcemanager.hostname with port 8030, as YARN's defaults give.
func SchedulerAddress(hc conf.HadoopConf) string {
	if a, ok := hc.Get(KeySchedulerAddress); ok && a != "" {
		return a
	}
	return hc.GetDefault(KeyRMHostname, "0.0.0.0") + ":" + strconv.Itoa(DefaultSchedulerPort)
}

// RegisterResponse is the ResourceManager's answer to Register.
type RegisterResponse struct {
	// MaxResource is the largest container the scheduler grants.
	MaxResource Resource
	Queue       string
	// PreviousContainers are containers kept from earlier attempts
	// (Submission.KeepContainers).
	PreviousContainers []Container
}

// Ask asks for containers of one size at one priority, anywhere in the
// cluster.
//
// An Ask REPLACES the outstanding request for its priority (and resource
// name "*"): Count is the total number of containers still wanted there,
// not an increment. The ResourceManager lowers its copy as it allocates,
// so a caller that sends an Ask again must send the full number it still
// wants (its original count minus the containers already received), and a
// Count of 0 cancels the request. An Allocate without Asks leaves the
// outstanding requests as they are.
//
// An Ask with a Place names a host or a rack instead: it replaces the
// outstanding request for that place at its priority. A locality-aware
// request sends, at one priority, an Ask per host and per rack wanted and
// an Ask anywhere (Place "") whose Count is the total; the scheduler
// then prefers the named places, and falls back to others (after its
// locality delay) unless the anywhere Ask is missing or StrictLocality is
// set on the place's Ask.
type Ask struct {
	Priority int32
	Count    int32
	Resource Resource
	// Place is a host name or a rack ("/default-rack"); "" means anywhere
	// ("*").
	Place string
	// StrictLocality turns off relax_locality: the scheduler allocates
	// only at Place.
	StrictLocality bool
}

// AllocateRequest is one heartbeat to the scheduler.
type AllocateRequest struct {
	Asks []Ask
	// Releases gives back allocated containers the AM does not want.
	Releases []ContainerID
	// Progress is the application's progress, 0..1.
	Progress float32
	// BlacklistAdd and BlacklistRemove change the application's blacklist
	// (ResourceBlacklistRequestProto): the scheduler allocates none of its
	// containers on a blacklisted place, a node's name or a rack. A node's
	// name is its host, or host:port when the ResourceManager includes
	// ports in node names (yarn.scheduler.include-port-in-node-name, as
	// clusters with several NodeManagers per host do). The blacklist holds
	// until removed; send each change once.
	BlacklistAdd    []string
	BlacklistRemove []string
}

// AMCommand is an order from the ResourceManager in an allocate response.
type AMCommand int32

// AM commands; the values are YARN's.
const (
	AMCommandNone     AMCommand = 0
	AMCommandResync   AMCommand = 1 // the RM restarted or lost the attempt: register again
	AMCommandShutdown AMCommand = 2 // the attempt is not known: exit
)

// AllocateResponse is the scheduler's answer to one heartbeat.
type AllocateResponse struct {
	// Allocated are containers newly allocated to the application.
	Allocated []Container
	// Completed are the final statuses of containers that ended since the
	// last heartbeat.
	Completed []ContainerStatus
	// NMTokens are the NodeManagers whose tokens arrived with this
	// response; the client keeps the tokens (see AMClient.NMToken).
	NMTokens        []NodeID
	Headroom        Resource
	NumClusterNodes int32
	Command         AMCommand
}

// AMClient is an ApplicationMaster's connection to the ResourceManager's
// scheduler (ApplicationMasterProtocol), authenticated with the attempt's
// AMRMToken.
//
// Register, Allocate and Finish must not be called concurrently with each
// other (the protocol numbers heartbeats); NMToken and Close are safe for
// concurrent use.
type AMClient struct {
	addr    string
	attempt string // the appattempt id the token was issued to

	mu       sync.Mutex // guards the fields below
	conn     *hrpc.Conn
	token    Token
	stale    bool // token rolled over: reconnect before the next call
	nmTokens map[NodeID]Token
	closed   bool

	lastResponseID int32 // only touched by Register/Allocate
}

// NewAMClient reads the AMRMToken from the credentials file tokenFile
// ("" means the file $HADOOP_TOKEN_FILE_LOCATION names, as inside an AM
// container) and connects to the scheduler address hc gives.
func NewAMClient(ctx context.Context, hc conf.HadoopConf, tokenFile string) (*AMClient, error) {
	if tokenFile == "" {
		tokenFile = os.Getenv(creds.TokenFileEnv)
		if tokenFile == "" {
			return nil, fmt.Errorf("yarn: no credentials file: %s is not set", creds.TokenFileEnv)
		}
	}
	cr, err := creds.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("yarn: read AMRMToken: %w", err)
	}
	t, ok := cr.Find(creds.KindAMRMToken)
	if !ok {
		return nil, fmt.Errorf("yarn: credentials file %s has no %s token", tokenFile, creds.KindAMRMToken)
	}
	id, err := tokenpb.ParseAMRMIdentifier(t.Identifier)
	if err != nil {
		return nil, fmt.Errorf("yarn: AMRMToken in %s: %w", tokenFile, err)
	}
	c := &AMClient{
		addr:     SchedulerAddress(hc),
		attempt:  id.AttemptString(),
		token:    Token{Identifier: t.Identifier, Password: t.Password, Kind: t.Kind, Service: t.Service},
		nmTokens: map[NodeID]Token{},
	}
	conn, err := c.dial(ctx, c.token)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return c, nil
}

func (c *AMClient) dial(ctx context.Context, t Token) (*hrpc.Conn, error) {
	conn, err := hrpc.Dial(ctx, c.addr, hrpc.Options{
		Protocol:        ApplicationMasterProtocol,
		Auth:            hrpc.AuthToken,
		TokenIdentifier: t.Identifier,
		TokenPassword:   t.Password,
	})
	if err != nil {
		return nil, fmt.Errorf("yarn: connect to scheduler %s as %s: %w", c.addr, c.attempt, err)
	}
	return conn, nil
}

// Addr is the scheduler address.
func (c *AMClient) Addr() string { return c.addr }

// Attempt is the application attempt id the AMRMToken names, in YARN's
// string form.
func (c *AMClient) Attempt() string { return c.attempt }

// Close closes the connection. It is idempotent. It does not unregister:
// call Finish first.
func (c *AMClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.conn.Close()
}

// connection returns a usable connection, redialling if the token rolled
// over or the server closed the old one.
func (c *AMClient) connection(ctx context.Context) (*hrpc.Conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	conn, tok := c.conn, c.token
	redial := c.stale || conn.Err() != nil
	c.mu.Unlock()
	if !redial {
		return conn, nil
	}
	nc, err := c.dial(ctx, tok)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		nc.Close()
		return nil, ErrClosed
	}
	c.conn.Close()
	c.conn, c.stale = nc, false
	return nc, nil
}

// call makes one call, on a new connection if the old one had failed
// (for example, the server closed it while idle). A call that fails in
// flight is not retried.
func (c *AMClient) call(ctx context.Context, method string, req, resp proto.Message) error {
	conn, err := c.connection(ctx)
	if err != nil {
		return err
	}
	return wrapErr(method, conn.Call(ctx, method, req, resp))
}

// Register registers the ApplicationMaster; the application turns
// RUNNING. host, rpcPort and trackingURL are shown to clients (rpcPort -1
// and "" when the AM serves nothing).
func (c *AMClient) Register(ctx context.Context, host string, rpcPort int, trackingURL string) (RegisterResponse, error) {
	req := &pb.RegisterApplicationMasterRequestProto{Host: proto.String(host), RpcPort: proto.Int32(int32(rpcPort)), TrackingUrl: proto.String(trackingURL)}
	resp := &pb.RegisterApplicationMasterResponseProto{}
	if err := c.call(ctx, "registerApplicationMaster", req, resp); err != nil {
		return RegisterResponse{}, err
	}
	c.lastResponseID = 0
	c.addNMTokens(resp.GetNmTokensFromPreviousAttempts())
	out := RegisterResponse{MaxResource: resourceFromProto(resp.GetMaximumCapability()), Queue: resp.GetQueue()}
	for _, ct := range resp.GetContainersFromPreviousAttempts() {
		out.PreviousContainers = append(out.PreviousContainers, containerFromProto(ct))
	}
	return out, nil
}

// Allocate sends one heartbeat: new asks, releases and progress. It must
// be called regularly (well within yarn.am.liveness-monitor.expiry-interval-ms)
// after Register; containers are allocated on NodeManager heartbeats and
// arrive in later responses. See Ask for how asks combine.
//
// The client keeps the response id the protocol requires and the NMTokens
// that arrive, and reconnects with a rolled-over AMRMToken.
func (c *AMClient) Allocate(ctx context.Context, r AllocateRequest) (AllocateResponse, error) {
	req, err := allocateRequestProto(r, c.lastResponseID)
	if err != nil {
		return AllocateResponse{}, err
	}
	resp := &pb.AllocateResponseProto{}
	if err := c.call(ctx, "allocate", req, resp); err != nil {
		return AllocateResponse{}, err
	}
	c.lastResponseID = resp.GetResponseId()
	out := AllocateResponse{
		Headroom:        resourceFromProto(resp.GetLimit()),
		NumClusterNodes: resp.GetNumClusterNodes(),
		NMTokens:        c.addNMTokens(resp.GetNmTokens()),
	}
	if resp.AMCommand != nil { // the getter's default (the first value) would read as AM_RESYNC
		out.Command = AMCommand(*resp.AMCommand)
	}
	for _, ct := range resp.GetAllocatedContainers() {
		out.Allocated = append(out.Allocated, containerFromProto(ct))
	}
	for _, st := range resp.GetCompletedContainerStatuses() {
		out.Completed = append(out.Completed, containerStatusFromProto(st))
	}
	if t := resp.GetAmRmToken(); t != nil && len(t.GetIdentifier()) > 0 {
		c.mu.Lock()
		c.token, c.stale = tokenFromProto(t), true
		c.mu.Unlock()
	}
	return out, nil
}

func (c *AMClient) addNMTokens(ts []*pb.NMTokenProto) []NodeID {
	if len(ts) == 0 {
		return nil
	}
	nodes := make([]NodeID, 0, len(ts))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range ts {
		n := nodeIDFromProto(t.GetNodeId())
		c.nmTokens[n] = tokenFromProto(t.GetToken())
		nodes = append(nodes, n)
	}
	return nodes
}

// NMToken returns the NMToken the ResourceManager issued for node, if any.
func (c *AMClient) NMToken(node NodeID) (Token, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.nmTokens[node]
	return t, ok
}

// Finish unregisters the ApplicationMaster with a final status,
// diagnostics and tracking URL, retrying every 100 ms until the
// ResourceManager confirms or ctx ends. The AM should exit soon after.
func (c *AMClient) Finish(ctx context.Context, status FinalStatus, diagnostics, trackingURL string) error {
	req := &pb.FinishApplicationMasterRequestProto{
		FinalApplicationStatus: pb.FinalApplicationStatusProto(status).Enum(),
		Diagnostics:            proto.String(diagnostics),
		TrackingUrl:            proto.String(trackingURL),
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		resp := &pb.FinishApplicationMasterResponseProto{}
		if err := c.call(ctx, "finishApplicationMaster", req, resp); err != nil {
			return err
		}
		if resp.GetIsUnregistered() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("yarn: finishApplicationMaster: not unregistered: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

func containerIDProto(id ContainerID) *pb.ContainerIdProto {
	app := appIDProto(id.Attempt.App)
	return &pb.ContainerIdProto{
		AppId:        app,
		AppAttemptId: &pb.ApplicationAttemptIdProto{ApplicationId: app, AttemptId: proto.Int32(id.Attempt.Attempt)},
		Id:           proto.Int64(id.ID),
	}
}

func containerIDFromProto(p *pb.ContainerIdProto) ContainerID {
	a := p.GetAppAttemptId()
	app := a.GetApplicationId()
	if app == nil {
		app = p.GetAppId()
	}
	return ContainerID{Attempt: AttemptID{App: appIDFromProto(app), Attempt: a.GetAttemptId()}, ID: p.GetId()}
}

func nodeIDFromProto(p *pb.NodeIdProto) NodeID { return NodeID{Host: p.GetHost(), Port: p.GetPort()} }

func tokenFromProto(p *hpb.TokenProto) Token {
	return Token{Identifier: p.GetIdentifier(), Password: p.GetPassword(), Kind: p.GetKind(), Service: p.GetService()}
}

func tokenProto(t Token) *hpb.TokenProto {
	return &hpb.TokenProto{Identifier: t.Identifier, Password: t.Password, Kind: proto.String(t.Kind), Service: proto.String(t.Service)}
}

func containerFromProto(p *pb.ContainerProto) Container {
	return Container{
		ID:              containerIDFromProto(p.GetId()),
		Node:            nodeIDFromProto(p.GetNodeId()),
		NodeHTTPAddress: p.GetNodeHttpAddress(),
		Resource:        resourceFromProto(p.GetResource()),
		Priority:        p.GetPriority().GetPriority(),
		Token:           tokenFromProto(p.GetContainerToken()),
	}
}

func containerStatusFromProto(p *pb.ContainerStatusProto) ContainerStatus {
	s := ContainerStatus{
		ID:          containerIDFromProto(p.GetContainerId()),
		State:       ContainerState(p.GetState()),
		ExitStatus:  p.GetExitStatus(),
		Diagnostics: p.GetDiagnostics(),
	}
	if p.ContainerSubState != nil { // unset reads as the first value, SCHEDULED
		s.SubState = ContainerSubState(*p.ContainerSubState)
	}
	return s
}

// allocateRequestProto encodes r as the heartbeat after responseID.
func allocateRequestProto(r AllocateRequest, responseID int32) (*pb.AllocateRequestProto, error) {
	req := &pb.AllocateRequestProto{ResponseId: proto.Int32(responseID), Progress: proto.Float32(r.Progress)}
	for _, a := range r.Asks {
		if a.Count < 0 || a.Resource.MemoryMB <= 0 || a.Resource.VCores <= 0 {
			return nil, fmt.Errorf("yarn: allocate: invalid ask %+v", a)
		}
		place := a.Place
		if place == "" {
			place = "*"
		}
		req.Ask = append(req.Ask, &pb.ResourceRequestProto{
			Priority:      &pb.PriorityProto{Priority: proto.Int32(a.Priority)},
			ResourceName:  proto.String(place),
			Capability:    &pb.ResourceProto{Memory: proto.Int64(a.Resource.MemoryMB), VirtualCores: proto.Int32(a.Resource.VCores)},
			NumContainers: proto.Int32(a.Count),
			RelaxLocality: proto.Bool(!a.StrictLocality),
		})
	}
	if len(r.BlacklistAdd) > 0 || len(r.BlacklistRemove) > 0 {
		req.BlacklistRequest = &pb.ResourceBlacklistRequestProto{BlacklistAdditions: r.BlacklistAdd, BlacklistRemovals: r.BlacklistRemove}
	}
	for _, id := range r.Releases {
		req.Release = append(req.Release, containerIDProto(id))
	}
	return req, nil
}
