package yarn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/creds"
	"github.com/spindle-ps/spindle/internal/hadoop/hrpc"
	"github.com/spindle-ps/spindle/internal/hadoop/kerberos"
	hpb "github.com/spindle-ps/spindle/internal/hadoop/proto"
	pb "github.com/spindle-ps/spindle/yarn/internal/proto"
)

// ApplicationClientProtocol is the RPC protocol of the ResourceManager's
// client port.
const ApplicationClientProtocol = "org.apache.hadoop.yarn.api.ApplicationClientProtocolPB"

// Configuration keys and the defaults YARN applies.
const (
	KeyRMAddress  = "yarn.resourcemanager.address"
	KeyRMHostname = "yarn.resourcemanager.hostname"
	DefaultRMPort = 8032
)

// RMAddress returns the ResourceManager client address (host:port) from
// hc: yarn.resourcemanager.address, else yarn.resourcemanager.hostname
// with port 8032, else 0.0.0.0:8032 as YARN's defaults give.
func RMAddress(hc conf.HadoopConf) string {
	if a, ok := hc.Get(KeyRMAddress); ok && a != "" {
		return a
	}
	return hc.GetDefault(KeyRMHostname, "0.0.0.0") + ":" + strconv.Itoa(DefaultRMPort)
}

// RMClient talks to a ResourceManager's ApplicationClientProtocol, with
// SIMPLE authentication or, on a secured cluster, Kerberos. It is safe for
// concurrent use; calls share one connection.
type RMClient struct {
	conn *hrpc.Conn
	addr string
	// timeout bounds a call whose context allows longer (0: none).
	timeout time.Duration
}

// Identity is who a client is: a user name under simple authentication,
// or a logged-in Kerberos client on a cluster whose
// hadoop.security.authentication is kerberos.
type Identity struct {
	User     string
	Kerberos *krbclient.Client
}

// NewRMClient connects to the ResourceManager hc names, as id. With
// hadoop.security.authentication=kerberos it authenticates with
// id.Kerberos to the principal yarn.resourcemanager.principal names.
func NewRMClient(ctx context.Context, hc conf.HadoopConf, id Identity) (*RMClient, error) {
	addr := RMAddress(hc)
	timeout, err := rpcTimeout(hc)
	if err != nil {
		return nil, err
	}
	opts := hrpc.Options{Protocol: ApplicationClientProtocol, User: id.User}
	if strings.EqualFold(strings.TrimSpace(hc.GetDefault("hadoop.security.authentication", "simple")), "kerberos") {
		if id.Kerberos == nil {
			return nil, fmt.Errorf("yarn: resource manager %s uses Kerberos, and there is no Kerberos login: %s", addr, kerberos.Hint)
		}
		spn, _, err := kerberos.ServicePrincipal(ctx, hc.GetDefault(KeyRMPrincipal, ""), addr)
		if err != nil {
			return nil, fmt.Errorf("yarn: resource manager %s uses Kerberos, but %s is not set", addr, KeyRMPrincipal)
		}
		opts.Auth, opts.Kerberos, opts.ServicePrincipal = hrpc.AuthKerberos, id.Kerberos, spn
		opts.Protection = hc.RPCProtection()
	}
	c, err := hrpc.Dial(ctx, addr, opts)
	if err != nil {
		return nil, fmt.Errorf("yarn: connect to resource manager %s: %w", addr, err)
	}
	return &RMClient{conn: c, addr: addr, timeout: timeout}, nil
}

// KeyRPCTimeout bounds each call of Hadoop's IPC clients, in
// milliseconds (0: none), as it does Hadoop's own.
const KeyRPCTimeout = "ipc.client.rpc-timeout.ms"

// defaultRPCTimeout is Hadoop's default of KeyRPCTimeout.
const defaultRPCTimeout = 2 * time.Minute

// rpcTimeout reads KeyRPCTimeout from hc.
func rpcTimeout(hc conf.HadoopConf) (time.Duration, error) {
	v := strings.TrimSpace(hc.GetDefault(KeyRPCTimeout, ""))
	if v == "" {
		return defaultRPCTimeout, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, fmt.Errorf("yarn: %s %q: want a number of milliseconds, 0 for no bound", KeyRPCTimeout, v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// KeyRMPrincipal names the ResourceManager's Kerberos principal.
const KeyRMPrincipal = "yarn.resourcemanager.principal"

// RMPrincipal is the ResourceManager's principal with _HOST resolved, the
// renewer of the delegation tokens an application carries.
func RMPrincipal(ctx context.Context, hc conf.HadoopConf) (string, error) {
	setting := hc.GetDefault(KeyRMPrincipal, "")
	spn, realm, err := kerberos.ServicePrincipal(ctx, setting, RMAddress(hc))
	if err != nil {
		return "", fmt.Errorf("yarn: %s is not set", KeyRMPrincipal)
	}
	if realm != "" {
		spn += "@" + realm
	}
	return spn, nil
}

// DelegationToken asks the ResourceManager for a delegation token that
// renewer may renew. Its service is the ResourceManager's address (IP
// and port), as Hadoop's clients look it up.
func (c *RMClient) DelegationToken(ctx context.Context, renewer string) (Token, error) {
	resp := &hpb.GetDelegationTokenResponseProto{}
	if err := c.call(ctx, "getDelegationToken", &hpb.GetDelegationTokenRequestProto{Renewer: proto.String(renewer)}, resp); err != nil {
		return Token{}, err
	}
	tp := resp.GetToken()
	if tp == nil || len(tp.GetIdentifier()) == 0 {
		return Token{}, errors.New("yarn: getDelegationToken: the resource manager issued no token")
	}
	t := tokenFromProto(tp)
	if t.Kind == "" {
		t.Kind = creds.KindRMDelegation
	}
	svc, err := creds.Service(ctx, c.addr)
	if err != nil {
		return Token{}, fmt.Errorf("yarn: getDelegationToken: the resource manager's address: %w", err)
	}
	t.Service = svc
	return t, nil
}

// Addr is the ResourceManager address the client is connected to.
func (c *RMClient) Addr() string { return c.addr }

// Close closes the connection. It is idempotent.
func (c *RMClient) Close() error { return c.conn.Close() }

// call makes one call, bounded by c.timeout unless ctx ends sooner: a
// ResourceManager that accepts a call and never answers it (hung, or
// behind a partition) does not hold its caller for ever.
func (c *RMClient) call(ctx context.Context, method string, req, resp proto.Message) error {
	if d, ok := ctx.Deadline(); c.timeout > 0 && (!ok || time.Until(d) > c.timeout) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.timeout,
			fmt.Errorf("the resource manager %s did not answer within %v (%s): %w", c.addr, c.timeout, KeyRPCTimeout, context.DeadlineExceeded))
		defer cancel()
	}
	err := c.conn.Call(ctx, method, req, resp)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && context.Cause(ctx) != ctx.Err() {
		err = context.Cause(ctx)
	}
	return wrapErr(method, err)
}

// NewApplication asks for a new application id.
func (c *RMClient) NewApplication(ctx context.Context) (NewApplication, error) {
	resp := &pb.GetNewApplicationResponseProto{}
	if err := c.call(ctx, "getNewApplication", &pb.GetNewApplicationRequestProto{}, resp); err != nil {
		return NewApplication{}, err
	}
	if resp.ApplicationId == nil {
		return NewApplication{}, errors.New("yarn: getNewApplication: no application id in response")
	}
	return NewApplication{ID: appIDFromProto(resp.ApplicationId), MaxResource: resourceFromProto(resp.MaximumCapability)}, nil
}

// Submit submits an application. The ResourceManager accepts it
// asynchronously: poll ApplicationReport for its state.
func (c *RMClient) Submit(ctx context.Context, s Submission) error {
	sc, err := submissionProto(s)
	if err != nil {
		return err
	}
	return c.call(ctx, "submitApplication", &pb.SubmitApplicationRequestProto{ApplicationSubmissionContext: sc}, &pb.SubmitApplicationResponseProto{})
}

func submissionProto(s Submission) (*pb.ApplicationSubmissionContextProto, error) {
	if s.ID == (ApplicationID{}) {
		return nil, errors.New("yarn: submission has no application id")
	}
	if s.Resource.MemoryMB <= 0 || s.Resource.VCores <= 0 {
		return nil, fmt.Errorf("yarn: submission resource %+v: memory and vcores must be positive", s.Resource)
	}
	if len(s.Command) == 0 {
		return nil, errors.New("yarn: submission has no AM command")
	}
	clc, err := launchContextProto(LaunchContext{Commands: s.Command, Env: s.Env, LocalResources: s.LocalResources, Tokens: s.Tokens})
	if err != nil {
		return nil, err
	}
	sc := &pb.ApplicationSubmissionContextProto{
		ApplicationId:   appIDProto(s.ID),
		AmContainerSpec: clc,
		Resource:        &pb.ResourceProto{Memory: proto.Int64(s.Resource.MemoryMB), VirtualCores: proto.Int32(s.Resource.VCores)},
		Priority:        &pb.PriorityProto{Priority: proto.Int32(s.Priority)},
		ApplicationTags: s.Tags,
	}
	if s.Name != "" {
		sc.ApplicationName = proto.String(s.Name)
	}
	if s.Queue != "" {
		sc.Queue = proto.String(s.Queue)
	}
	if s.Type != "" {
		sc.ApplicationType = proto.String(s.Type)
	}
	if s.MaxAttempts > 0 {
		sc.MaxAppAttempts = proto.Int32(s.MaxAttempts)
	}
	if s.KeepContainers {
		sc.KeepContainersAcrossApplicationAttempts = proto.Bool(true)
	}
	return sc, nil
}

func launchContextProto(l LaunchContext) (*pb.ContainerLaunchContextProto, error) {
	clc := &pb.ContainerLaunchContextProto{Command: l.Commands, Tokens: l.Tokens}
	for _, k := range sortedKeys(l.Env) {
		clc.Environment = append(clc.Environment, &pb.StringStringMapProto{Key: proto.String(k), Value: proto.String(l.Env[k])})
	}
	for _, k := range sortedKeys(l.LocalResources) {
		lr, err := localResourceProto(l.LocalResources[k])
		if err != nil {
			return nil, fmt.Errorf("yarn: local resource %q: %w", k, err)
		}
		clc.LocalResources = append(clc.LocalResources, &pb.StringLocalResourceMapProto{Key: proto.String(k), Value: lr})
	}
	return clc, nil
}

func localResourceProto(r LocalResource) (*pb.LocalResourceProto, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, err
	}
	port := int32(-1) // as Java's URL.fromURI sets it when absent
	if p := u.Port(); p != "" {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return nil, err
		}
		port = int32(n)
	}
	typ := pb.LocalResourceTypeProto_FILE
	if r.Archive {
		typ = pb.LocalResourceTypeProto_ARCHIVE
	}
	vis := pb.LocalResourceVisibilityProto_APPLICATION
	switch r.Visibility {
	case "", "APPLICATION":
	case "PUBLIC":
		vis = pb.LocalResourceVisibilityProto_PUBLIC
	case "PRIVATE":
		vis = pb.LocalResourceVisibilityProto_PRIVATE
	default:
		return nil, fmt.Errorf("unknown visibility %q", r.Visibility)
	}
	return &pb.LocalResourceProto{
		Resource:   &pb.URLProto{Scheme: proto.String(u.Scheme), Host: proto.String(u.Hostname()), Port: proto.Int32(port), File: proto.String(u.Path)},
		Size:       proto.Int64(r.Size),
		Timestamp:  proto.Int64(r.Timestamp),
		Type:       typ.Enum(),
		Visibility: vis.Enum(),
	}, nil
}

// ApplicationReport returns the ResourceManager's report on id; an
// unknown id gives an error matching ErrApplicationNotFound.
func (c *RMClient) ApplicationReport(ctx context.Context, id ApplicationID) (ApplicationReport, error) {
	resp := &pb.GetApplicationReportResponseProto{}
	if err := c.call(ctx, "getApplicationReport", &pb.GetApplicationReportRequestProto{ApplicationId: appIDProto(id)}, resp); err != nil {
		return ApplicationReport{}, err
	}
	return appReportFromProto(resp.GetApplicationReport()), nil
}

// Kill asks the ResourceManager to kill id. It reports whether the kill
// has completed; if not, poll ApplicationReport until the state is terminal.
func (c *RMClient) Kill(ctx context.Context, id ApplicationID) (completed bool, err error) {
	resp := &pb.KillApplicationResponseProto{}
	if err := c.call(ctx, "forceKillApplication", &pb.KillApplicationRequestProto{ApplicationId: appIDProto(id)}, resp); err != nil {
		return false, err
	}
	return resp.GetIsKillCompleted(), nil
}

// ClusterMetrics returns the NodeManager counts.
func (c *RMClient) ClusterMetrics(ctx context.Context) (ClusterMetrics, error) {
	resp := &pb.GetClusterMetricsResponseProto{}
	if err := c.call(ctx, "getClusterMetrics", &pb.GetClusterMetricsRequestProto{}, resp); err != nil {
		return ClusterMetrics{}, err
	}
	m := resp.GetClusterMetrics()
	return ClusterMetrics{
		NodeManagers:    m.GetNumNodeManagers(),
		Active:          m.GetNumActiveNms(),
		Decommissioned:  m.GetNumDecommissionedNms(),
		Decommissioning: m.GetNumDecommissioningNms(),
		Lost:            m.GetNumLostNms(),
		Unhealthy:       m.GetNumUnhealthyNms(),
		Rebooted:        m.GetNumRebootedNms(),
		Shutdown:        m.GetNumShutdownNms(),
	}, nil
}

// Nodes lists the NodeManagers in the given states; no states means
// the ResourceManager's default (RUNNING nodes).
func (c *RMClient) Nodes(ctx context.Context, states ...NodeState) ([]NodeReport, error) {
	req := &pb.GetClusterNodesRequestProto{}
	for _, s := range states {
		req.NodeStates = append(req.NodeStates, pb.NodeStateProto(s))
	}
	resp := &pb.GetClusterNodesResponseProto{}
	if err := c.call(ctx, "getClusterNodes", req, resp); err != nil {
		return nil, err
	}
	out := make([]NodeReport, 0, len(resp.GetNodeReports()))
	for _, n := range resp.GetNodeReports() {
		out = append(out, NodeReport{
			Host:          n.GetNodeId().GetHost(),
			Port:          n.GetNodeId().GetPort(),
			HTTPAddress:   n.GetHttpAddress(),
			Rack:          n.GetRackName(),
			State:         NodeState(n.GetNodeState()),
			Capability:    resourceFromProto(n.GetCapability()),
			Used:          resourceFromProto(n.GetUsed()),
			NumContainers: n.GetNumContainers(),
			HealthReport:  n.GetHealthReport(),
		})
	}
	return out, nil
}

// Queue describes the named queue and its direct children.
func (c *RMClient) Queue(ctx context.Context, name string) (QueueInfo, error) {
	resp := &pb.GetQueueInfoResponseProto{}
	req := &pb.GetQueueInfoRequestProto{QueueName: proto.String(name), IncludeApplications: proto.Bool(false),
		IncludeChildQueues: proto.Bool(true), Recursive: proto.Bool(false)}
	if err := c.call(ctx, "getQueueInfo", req, resp); err != nil {
		return QueueInfo{}, err
	}
	return queueFromProto(resp.GetQueueInfo()), nil
}

func queueFromProto(q *pb.QueueInfoProto) QueueInfo {
	out := QueueInfo{
		Name:            q.GetQueueName(),
		State:           QueueState(q.GetState()),
		Capacity:        q.GetCapacity(),
		MaximumCapacity: q.GetMaximumCapacity(),
		CurrentCapacity: q.GetCurrentCapacity(),
	}
	for _, ch := range q.GetChildQueues() {
		out.Children = append(out.Children, queueFromProto(ch))
	}
	return out
}

func appIDProto(id ApplicationID) *pb.ApplicationIdProto {
	return &pb.ApplicationIdProto{Id: proto.Int32(id.ID), ClusterTimestamp: proto.Int64(id.ClusterTimestamp)}
}

func appIDFromProto(p *pb.ApplicationIdProto) ApplicationID {
	return ApplicationID{ClusterTimestamp: p.GetClusterTimestamp(), ID: p.GetId()}
}

func resourceFromProto(p *pb.ResourceProto) Resource {
	return Resource{MemoryMB: p.GetMemory(), VCores: p.GetVirtualCores()}
}

func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func appReportFromProto(r *pb.ApplicationReportProto) ApplicationReport {
	out := ApplicationReport{
		ID:          appIDFromProto(r.GetApplicationId()),
		Name:        r.GetName(),
		Type:        r.GetApplicationType(),
		User:        r.GetUser(),
		Queue:       r.GetQueue(),
		Tags:        r.GetApplicationTags(),
		State:       AppState(r.GetYarnApplicationState()),
		FinalStatus: FinalStatus(r.GetFinalApplicationStatus()),
		Diagnostics: r.GetDiagnostics(),
		TrackingURL: r.GetTrackingUrl(),
		Host:        r.GetHost(),
		RPCPort:     r.GetRpcPort(),
		Progress:    r.GetProgress(),
		StartTime:   msTime(r.GetStartTime()),
		FinishTime:  msTime(r.GetFinishTime()),
	}
	if a := r.GetCurrentApplicationAttemptId(); a != nil {
		out.CurrentAttempt = AttemptID{App: appIDFromProto(a.GetApplicationId()), Attempt: a.GetAttemptId()}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
