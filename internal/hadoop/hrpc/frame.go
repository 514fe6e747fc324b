package hrpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ps/spindle/internal/hadoop/proto"
)

// Special call ids (Hadoop's RpcConstants and AuthProtocol).
const (
	authFailedCallID  = -1
	connContextCallID = -3
	pingCallID        = -4
	saslCallID        = -33
)

// ErrFrameTooLarge is returned (wrapped) for a frame whose length exceeds
// Options.MaxFrame, in either direction.
var ErrFrameTooLarge = errors.New("hrpc: frame too large")

// packet builds one client → server frame:
//
//	+------------------+---------------+--------+---------------+-----+
//	| uint32 BE length | varint len    | header | varint len    | msg | ...
//	+------------------+---------------+--------+---------------+-----+
//
// where length counts everything after itself and each message is
// preceded by its varint length (an empty message is the single byte 00).
func packet(msgs ...proto.Message) ([]byte, error) {
	b := make([]byte, 4, 128)
	for _, m := range msgs {
		mb, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("hrpc: marshal %T: %w", m, err)
		}
		b = protowire.AppendVarint(b, uint64(len(mb)))
		b = append(b, mb...)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b, nil
}

// readFrame reads one uint32-length-prefixed frame of at most max bytes.
func readFrame(r io.Reader, max int) ([]byte, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lb[:])
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, max)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// splitDelimited returns the first varint-length-delimited message of b
// and the rest.
func splitDelimited(b []byte) (msg, rest []byte, err error) {
	n, k := protowire.ConsumeVarint(b)
	if k < 0 {
		return nil, nil, errors.New("hrpc: malformed message length")
	}
	if n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("hrpc: message length %d exceeds frame (%d bytes left)", n, len(b)-k)
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// response is a decoded server → client frame:
//
//	uint32 BE length | varint len | RpcResponseHeaderProto | [varint len | body]
//
// The body is present only when the status is SUCCESS.
type response struct {
	header *pb.RpcResponseHeaderProto
	body   []byte // the body message's bytes, nil when absent
}

// callID returns the header's call id as the signed value the client sent.
func (r *response) callID() int32 { return int32(r.header.GetCallId()) }

// decodeResponse decodes a frame's contents.
func decodeResponse(frame []byte) (*response, error) {
	hb, rest, err := splitDelimited(frame)
	if err != nil {
		return nil, fmt.Errorf("response header: %w", err)
	}
	h := &pb.RpcResponseHeaderProto{}
	if err := proto.Unmarshal(hb, h); err != nil {
		return nil, fmt.Errorf("hrpc: response header: %w", err)
	}
	r := &response{header: h}
	if len(rest) > 0 {
		body, trailing, err := splitDelimited(rest)
		if err != nil {
			return nil, fmt.Errorf("response body: %w", err)
		}
		if len(trailing) > 0 {
			return nil, fmt.Errorf("hrpc: %d trailing bytes after response body", len(trailing))
		}
		r.body = body
	} else if h.GetStatus() == pb.RpcResponseHeaderProto_SUCCESS {
		r.body = []byte{}
	}
	return r, nil
}

// readResponse reads and decodes one response frame of at most max bytes.
func readResponse(rd io.Reader, max int) (*response, error) {
	f, err := readFrame(rd, max)
	if err != nil {
		return nil, err
	}
	return decodeResponse(f)
}
