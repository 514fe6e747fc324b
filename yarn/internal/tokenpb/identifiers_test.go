package tokenpb

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// sampleAMRMIdentifier is the identifier of the YARN_AM_RM_TOKEN in a real
// container_tokens file written by a NodeManager.
const sampleAMRMIdentifier = "0a0d0a09080d109f81d5b2f32d100110fca7e6b103"

func TestParseAMRMIdentifierSample(t *testing.T) {
	t.Parallel()
	b, _ := hex.DecodeString(sampleAMRMIdentifier)
	id, err := ParseAMRMIdentifier(b)
	if err != nil {
		t.Fatal(err)
	}
	want := AMRMIdentifier{ApplicationID: ApplicationID{ClusterTimestamp: 1577164554399, ID: 13}, Attempt: 1, KeyID: 909743100}
	if id != want {
		t.Fatalf("got %+v, want %+v", id, want)
	}
	if s := id.AttemptString(); s != "appattempt_1577164554399_0013_000001" {
		t.Errorf("AttemptString = %q", s)
	}
	if s := id.ApplicationID.String(); s != "application_1577164554399_0013" {
		t.Errorf("ApplicationID.String = %q", s)
	}
	again, err := id.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, b) {
		t.Errorf("Marshal = %x, want %x", again, b)
	}
}

// TestFieldNumbers builds identifiers by hand from the Hadoop field numbers,
// independently of the generated code.
func TestFieldNumbers(t *testing.T) {
	t.Parallel()
	msg := func(fields ...[]byte) []byte { return bytes.Join(fields, nil) }
	varint := func(n protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, n, protowire.VarintType), v)
	}
	sub := func(n protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, n, protowire.BytesType), b)
	}
	appID := msg(varint(1, 7), varint(2, 1700000000000))
	attempt := msg(sub(1, appID), varint(2, 3))
	node := msg(sub(1, []byte("nm1.example")), varint(2, 45454))
	nm := msg(sub(1, attempt), sub(2, node), sub(3, []byte("alice")), varint(4, 42))

	got, err := ParseNMIdentifier(nm)
	if err != nil {
		t.Fatal(err)
	}
	want := NMIdentifier{
		ApplicationID: ApplicationID{ClusterTimestamp: 1700000000000, ID: 7},
		Attempt:       3, NodeHost: "nm1.example", NodePort: 45454, AppSubmitter: "alice", KeyID: 42,
	}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if s := got.AttemptString(); s != "appattempt_1700000000000_0007_000003" {
		t.Errorf("AttemptString = %q", s)
	}
	b, err := got.Marshal()
	if err != nil || !bytes.Equal(b, nm) {
		t.Errorf("Marshal = %x, %v; want %x", b, err, nm)
	}

	cid := msg(sub(2, attempt), varint(3, 5))
	ct := msg(sub(1, cid), sub(2, []byte("nm1.example:45454")), sub(3, []byte("alice")), varint(5, 99), varint(6, 8),
		varint(13, 1)) // executionType, not modelled: kept as an unknown field
	c, err := ParseContainerIdentifier(ct)
	if err != nil {
		t.Fatal(err)
	}
	if c.GetContainerId().GetId() != 5 || c.GetNmHostAddr() != "nm1.example:45454" || c.GetAppSubmitter() != "alice" ||
		c.GetExpiryTimeStamp() != 99 || c.GetMasterKeyId() != 8 ||
		c.GetContainerId().GetAppAttemptId().GetApplicationId().GetId() != 7 {
		t.Errorf("ParseContainerIdentifier = %v", c)
	}
	if c.GetAllocationRequestId() != -1 {
		t.Errorf("allocation_request_id default = %d, want -1", c.GetAllocationRequestId())
	}
}

func TestDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	id, err := ParseAMRMIdentifier(nil)
	if err != nil {
		t.Fatal(err)
	}
	if id.KeyID != -1 {
		t.Errorf("absent keyId = %d, want -1 as in Hadoop", id.KeyID)
	}
	if s := id.AttemptString(); s != "appattempt_0_0000_000000" {
		t.Errorf("AttemptString of empty identifier = %q", s)
	}
	for _, in := range [][]byte{{0x0a, 0x05, 0x0a}, {0xff}, {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		if _, err := ParseAMRMIdentifier(in); !errors.Is(err, ErrIdentifier) {
			t.Errorf("ParseAMRMIdentifier(%x) = %v, want ErrIdentifier", in, err)
		}
		if _, err := ParseNMIdentifier(in); !errors.Is(err, ErrIdentifier) {
			t.Errorf("ParseNMIdentifier(%x) = %v, want ErrIdentifier", in, err)
		}
	}
	if _, err := ParseNMIdentifier(make([]byte, maxIdentifierSize+1)); !errors.Is(err, ErrIdentifier) {
		t.Errorf("oversized identifier: %v, want ErrIdentifier", err)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		id   AMRMIdentifier
	}{
		{"zero", AMRMIdentifier{}},
		{"large", AMRMIdentifier{ApplicationID: ApplicationID{ClusterTimestamp: 1 << 45, ID: 123456}, Attempt: 1234567, KeyID: -5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := tt.id.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseAMRMIdentifier(b)
			if err != nil || got != tt.id {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.id)
			}
		})
	}
	nm := NMIdentifier{ApplicationID: ApplicationID{ClusterTimestamp: 5, ID: 6}, Attempt: 2, NodeHost: "h", NodePort: 1, AppSubmitter: "u", KeyID: 9}
	b, err := nm.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ParseNMIdentifier(b); err != nil || got != nm {
		t.Fatalf("got %+v, %v; want %+v", got, err, nm)
	}
	if got := (AMRMIdentifier{ApplicationID: ApplicationID{ID: 123456}, Attempt: 1234567}).AttemptString(); got != "appattempt_0_123456_1234567" {
		t.Errorf("wide AttemptString = %q", got)
	}
}

func TestRegisteredName(t *testing.T) {
	t.Parallel()
	if got := proto.MessageName(&AMRMTokenIdentifierProto{}); got != "spindle.yarn.token.AMRMTokenIdentifierProto" {
		t.Errorf("message name %q", got)
	}
}
