package hrpc

import (
	"bytes"
	"encoding/binary"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ps/spindle/internal/hadoop/proto"
)

// FuzzReadResponse feeds arbitrary bytes to the response decoder, whole
// and split in two reads at the midpoint, and checks that it neither
// panics nor accepts a frame above the limit, and that both ways agree.
func FuzzReadResponse(f *testing.F) {
	for _, m := range [][]proto.Message{
		{&pb.RpcResponseHeaderProto{CallId: proto.Uint32(7), Status: pb.RpcResponseHeaderProto_SUCCESS.Enum()}, &pb.GetDelegationTokenResponseProto{Token: &pb.TokenProto{Identifier: []byte{1}, Password: []byte{2}, Kind: proto.String("k"), Service: proto.String("s")}}},
		{&pb.RpcResponseHeaderProto{CallId: proto.Uint32(0xffffffdf), Status: pb.RpcResponseHeaderProto_SUCCESS.Enum()}, &pb.RpcSaslProto{State: pb.RpcSaslProto_NEGOTIATE.Enum()}},
		{&pb.RpcResponseHeaderProto{CallId: proto.Uint32(3), Status: pb.RpcResponseHeaderProto_ERROR.Enum(), ExceptionClassName: proto.String("x.Y"), ErrorMsg: proto.String("m")}},
	} {
		p, err := packet(m...)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p)
	}
	const max = 1 << 16
	f.Fuzz(func(t *testing.T, b []byte) {
		r1, err1 := readResponse(bytes.NewReader(b), max)
		split := iotest.HalfReader(bytes.NewReader(b))
		r2, err2 := readResponse(split, max)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("whole: %v, split: %v", err1, err2)
		}
		if err1 != nil {
			return
		}
		if n := binary.BigEndian.Uint32(b); n > max {
			t.Fatalf("accepted a frame of %d bytes, over the limit %d", n, max)
		}
		if !proto.Equal(r1.header, r2.header) || !bytes.Equal(r1.body, r2.body) {
			t.Fatalf("whole and split reads differ")
		}
		if r1.header.GetStatus() != pb.RpcResponseHeaderProto_SUCCESS && r1.body != nil {
			_ = remoteError("m", r1.header).Error()
		}
	})
}
