package hrpc

import (
	"fmt"
	"net"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ps/spindle/internal/hadoop/proto"
)

// securityLayer is a SASL security layer negotiated in the handshake:
// integrity, or integrity and confidentiality, for every message after it.
type securityLayer interface {
	Wrap(msg []byte) ([]byte, error)
	Unwrap(token []byte) ([]byte, error)
}

// Protection levels, as hadoop.rpc.protection names them.
const (
	ProtectAuthentication = "authentication"
	ProtectIntegrity      = "integrity"
	ProtectPrivacy        = "privacy"
)

// protected is a connection whose streams go through a security layer,
// as Hadoop's SaslRpcClient and Server wrap them: what the client writes
// is cut into pieces of at most max bytes, each wrapped and sent as a SASL
// WRAP message (call id -33); the server's messages arrive the same way,
// and unwrap into the stream of ordinary frames they carry.
type protected struct {
	net.Conn
	layer    securityLayer
	max      int    // largest piece wrapped at once
	maxFrame int    // largest wrapped frame accepted
	plain    []byte // unwrapped bytes not yet read
}

func (p *protected) Write(b []byte) (int, error) {
	for off := 0; off < len(b); off += p.max {
		piece := b[off:min(off+p.max, len(b))]
		tok, err := p.layer.Wrap(piece)
		if err != nil {
			return off, fmt.Errorf("hrpc: wrap: %w", err)
		}
		frame, err := packet(requestHeader(saslCallID, []byte{}), &pb.RpcSaslProto{State: pb.RpcSaslProto_WRAP.Enum(), Token: tok})
		if err != nil {
			return off, err
		}
		if _, err := p.Conn.Write(frame); err != nil {
			return off, err
		}
	}
	return len(b), nil
}

func (p *protected) Read(b []byte) (int, error) {
	for len(p.plain) == 0 {
		f, err := readFrame(p.Conn, p.maxFrame)
		if err != nil {
			return 0, err
		}
		r, err := decodeResponse(f)
		if err != nil {
			return 0, err
		}
		if r.header.GetStatus() != pb.RpcResponseHeaderProto_SUCCESS {
			return 0, remoteError("", r.header)
		}
		if id := r.callID(); id != saslCallID {
			return 0, fmt.Errorf("hrpc: an unwrapped message (call id %d) on a protected connection", id)
		}
		m := &pb.RpcSaslProto{}
		if err := proto.Unmarshal(r.body, m); err != nil {
			return 0, fmt.Errorf("hrpc: wrapped message: %w", err)
		}
		if m.GetState() != pb.RpcSaslProto_WRAP {
			return 0, fmt.Errorf("hrpc: sasl %v on a protected connection, want WRAP", m.GetState())
		}
		if p.plain, err = p.layer.Unwrap(m.GetToken()); err != nil {
			return 0, fmt.Errorf("hrpc: unwrap: %w", err)
		}
	}
	n := copy(b, p.plain)
	p.plain = p.plain[n:]
	return n, nil
}

// choose picks the protection to use among those the server offers: the
// first of want that it offers, where an empty want takes the strongest
// offered. It returns "" when there is none in common.
func choose(want []string, offered map[string]bool) string {
	if len(want) == 0 {
		want = []string{ProtectPrivacy, ProtectIntegrity, ProtectAuthentication}
	}
	for _, w := range want {
		if offered[w] {
			return w
		}
	}
	return ""
}
