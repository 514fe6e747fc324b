package yarn

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ps/spindle/yarn/internal/proto"
)

func TestContainerIDString(t *testing.T) {
	app := ApplicationID{ClusterTimestamp: 1795253618269, ID: 3}
	tests := []struct {
		name string
		id   ContainerID
		want string
	}{
		{"plain", ContainerID{AttemptID{app, 1}, 2}, "container_1795253618269_0003_01_000002"},
		{"epoch", ContainerID{AttemptID{app, 2}, 5<<40 | 17}, "container_e05_1795253618269_0003_02_000017"},
		{"wide", ContainerID{AttemptID{app, 123}, 1234567}, "container_1795253618269_0003_123_1234567"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.id.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

// field appends a length-delimited field.
func field(b []byte, n protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func varintField(b []byte, n protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// TestAllocateResponseFieldNumbers decodes an AllocateResponseProto
// assembled by hand with Hadoop's field numbers.
func TestAllocateResponseFieldNumbers(t *testing.T) {
	t.Parallel()
	var appID, attempt, cid, node, tok, ctr, status, nmTok, b []byte
	appID = varintField(varintField(nil, 1, 3), 2, 1795253618269)
	attempt = varintField(field(nil, 1, appID), 2, 1)
	cid = varintField(field(field(nil, 1, appID), 2, attempt), 3, 2)
	node = varintField(field(nil, 1, []byte("nm1")), 2, 45627)
	tok = field(field(field(field(nil, 1, []byte{1, 2}), 2, []byte{3}), 3, []byte("ContainerToken")), 4, []byte("127.0.0.1:45627"))
	ctr = field(field(field(nil, 1, cid), 2, node), 6, tok)
	ctr = field(ctr, 3, []byte("nm1:8042"))
	ctr = field(ctr, 4, varintField(varintField(nil, 1, 128), 2, 1))
	ctr = field(ctr, 5, varintField(nil, 1, 1))
	status = varintField(varintField(field(nil, 1, cid), 2, 3), 4, 3)
	status = field(status, 3, []byte("Exception from container-launch"))
	status = varintField(status, 8, 5) // container_sub_state CSS_DONE
	nmTok = field(field(nil, 1, node), 2, tok)
	b = varintField(nil, 2, 7)
	b = field(b, 3, ctr)
	b = field(b, 4, status)
	b = varintField(b, 7, 2)
	b = field(b, 9, nmTok)
	b = field(b, 12, tok)

	resp := &pb.AllocateResponseProto{}
	if err := proto.Unmarshal(b, resp); err != nil {
		t.Fatal(err)
	}
	if resp.AMCommand != nil {
		t.Errorf("AMCommand set to %v without field 1", resp.GetAMCommand())
	}
	if resp.GetResponseId() != 7 || resp.GetNumClusterNodes() != 2 || !bytes.Equal(resp.GetAmRmToken().GetIdentifier(), []byte{1, 2}) {
		t.Errorf("response id %d, nodes %d, am_rm_token %v", resp.GetResponseId(), resp.GetNumClusterNodes(), resp.GetAmRmToken())
	}
	wantID := ContainerID{Attempt: AttemptID{App: ApplicationID{1795253618269, 3}, Attempt: 1}, ID: 2}
	wantTok := Token{Identifier: []byte{1, 2}, Password: []byte{3}, Kind: "ContainerToken", Service: "127.0.0.1:45627"}
	if len(resp.GetAllocatedContainers()) != 1 {
		t.Fatalf("allocated %v", resp.GetAllocatedContainers())
	}
	c := containerFromProto(resp.GetAllocatedContainers()[0])
	if c.ID != wantID || c.Node != (NodeID{"nm1", 45627}) || c.NodeHTTPAddress != "nm1:8042" ||
		c.Resource != (Resource{128, 1}) || c.Priority != 1 || !bytes.Equal(c.Token.Identifier, wantTok.Identifier) ||
		c.Token.Kind != wantTok.Kind || c.Token.Service != wantTok.Service {
		t.Errorf("container = %+v", c)
	}
	if len(resp.GetCompletedContainerStatuses()) != 1 {
		t.Fatalf("completed %v", resp.GetCompletedContainerStatuses())
	}
	s := containerStatusFromProto(resp.GetCompletedContainerStatuses()[0])
	if s.ID != wantID || s.State != ContainerComplete || s.SubState != SubDone || s.ExitStatus != 3 ||
		s.Diagnostics != "Exception from container-launch" {
		t.Errorf("status = %+v", s)
	}
	if nt := resp.GetNmTokens(); len(nt) != 1 || nodeIDFromProto(nt[0].GetNodeId()) != (NodeID{"nm1", 45627}) {
		t.Errorf("nm tokens = %v", nt)
	}
	// Re-encoding the container token for startContainers keeps it intact.
	again, err := proto.Marshal(tokenProto(c.Token))
	if err != nil || !bytes.Equal(again, tok) {
		t.Errorf("container token re-encoded as %x, %v; want %x", again, err, tok)
	}
}

func TestContainerStatusDefaults(t *testing.T) {
	t.Parallel()
	s := containerStatusFromProto(&pb.ContainerStatusProto{})
	if s.ExitStatus != ExitInvalid {
		t.Errorf("exit status of an empty status = %d, want %d", s.ExitStatus, ExitInvalid)
	}
	if s.SubState != 0 {
		t.Errorf("sub-state of an empty status (a NodeManager before 3.1) = %v, want unknown", s.SubState)
	}
}

func TestContainerFailure(t *testing.T) {
	t.Parallel()
	id := ContainerID{Attempt: AttemptID{App: ApplicationID{1, 2}, Attempt: 1}, ID: 4}
	if err := containerFailure("startContainers", id, nil); err != nil {
		t.Fatalf("no failures: %v", err)
	}
	err := containerFailure("startContainers", id, []*pb.ContainerExceptionMapProto{{
		ContainerId: containerIDProto(id),
		Exception: &pb.SerializedExceptionProto{
			ClassName: proto.String("org.apache.hadoop.security.token.SecretManager$InvalidToken"),
			Message:   proto.String("Invalid container token used for starting container"),
		},
	}})
	var re *RemoteError
	if !errors.As(err, &re) || re.Method != "startContainers" || !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("err = %v, want a *RemoteError matching fs.ErrPermission", err)
	}
	if want := "yarn: startContainers: org.apache.hadoop.security.token.SecretManager$InvalidToken: container_1_0002_01_000004: Invalid container token used for starting container"; err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
}

func TestAskValidation(t *testing.T) {
	t.Parallel()
	c := &AMClient{nmTokens: map[NodeID]Token{}}
	for _, a := range []Ask{{Count: -1, Resource: Resource{128, 1}}, {Count: 1}, {Count: 1, Resource: Resource{128, 0}}} {
		if _, err := c.Allocate(t.Context(), AllocateRequest{Asks: []Ask{a}}); err == nil {
			t.Errorf("Allocate accepted ask %+v", a)
		}
	}
}

// TestAllocateRequestPlacesAndBlacklist encodes asks by place and a
// blacklist change and reads them back with Hadoop's field numbers.
func TestAllocateRequestPlacesAndBlacklist(t *testing.T) {
	t.Parallel()
	r := AllocateRequest{
		Asks: []Ask{
			{Priority: 2, Count: 3, Resource: Resource{128, 1}},
			{Priority: 2, Count: 2, Resource: Resource{128, 1}, Place: "dn1"},
			{Priority: 2, Count: 1, Resource: Resource{128, 1}, Place: "/default-rack", StrictLocality: true},
		},
		BlacklistAdd:    []string{"nm1:45627"},
		BlacklistRemove: []string{"nm2"},
	}
	req, err := allocateRequestProto(r, 5)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	// The blacklist request is field 3, additions 1 and removals 2.
	var bl []byte
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			t.Fatalf("bad tag in %x", b)
		}
		b = b[l:]
		m := protowire.ConsumeFieldValue(n, typ, b)
		if n == 3 {
			bl, _ = protowire.ConsumeBytes(b)
		}
		b = b[m:]
	}
	want := field(field(nil, 1, []byte("nm1:45627")), 2, []byte("nm2"))
	if !bytes.Equal(bl, want) {
		t.Errorf("blacklist_request = %x, want %x", bl, want)
	}
	names := map[string]bool{}
	for _, a := range req.GetAsk() {
		names[a.GetResourceName()] = a.GetRelaxLocality()
	}
	if len(names) != 3 || !names["*"] || !names["dn1"] || names["/default-rack"] {
		t.Errorf("resource names and relax_locality = %v", names)
	}
	if empty, _ := allocateRequestProto(AllocateRequest{}, 0); empty.BlacklistRequest != nil {
		t.Errorf("an empty request carries a blacklist request")
	}
}
