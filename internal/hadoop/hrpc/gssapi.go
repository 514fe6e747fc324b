package hrpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/crypto/etype"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"github.com/jcmturner/gokrb5/v8/types"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ps/spindle/internal/hadoop/kerberos"
	pb "github.com/spindle-ps/spindle/internal/hadoop/proto"
)

// SASL GSSAPI security layers (RFC 4752 §3.3): the bit mask a server
// offers in the first byte of its wrapped challenge.
const (
	qopAuth      = 0x01 // no security layer
	qopIntegrity = 0x02
	qopPrivacy   = 0x04
)

// saslKerberos runs the KERBEROS / GSSAPI exchange:
//
//	C: NEGOTIATE
//	S: NEGOTIATE auths=[{KERBEROS, GSSAPI, protocol "rm", serverId "host"}, ...]
//	C: INITIATE token=<GSS-API initial token: AP-REQ for protocol/serverId> auths=[that auth]
//	S: CHALLENGE token=<wrap token from the acceptor: security layers offered, max size>
//	C: RESPONSE token=<wrap token from the initiator: layer chosen, max size>
//	S: SUCCESS
//
// The server's wrap token is sealed with the ticket's session key, which
// only the real service could have read from the ticket: checking it
// authenticates the server. With integrity or privacy chosen, c.nc then
// goes through the layer. It returns the client's principal, the user the
// connection context names.
func (c *Conn) saslKerberos() (string, error) {
	cl := c.opts.Kerberos
	if cl == nil || cl.Credentials == nil {
		return "", errors.New("hrpc: AuthKerberos without a logged-in Kerberos client")
	}
	if c.opts.ServicePrincipal == "" {
		return "", errors.New("hrpc: AuthKerberos without the server's principal")
	}
	auth, err := c.negotiate("KERBEROS", "GSSAPI")
	if err != nil {
		return "", err
	}
	if auth == nil {
		return "", errors.New("hrpc: sasl: the server does not use Kerberos (it accepted the connection without authentication); check hadoop.security.authentication")
	}
	if offered := auth.GetProtocol() + "/" + auth.GetServerId(); offered != c.opts.ServicePrincipal {
		return "", fmt.Errorf("hrpc: sasl: the server is %s, but its principal should be %s (check the *.principal settings)", offered, c.opts.ServicePrincipal)
	}
	tkt, key, err := cl.GetServiceTicket(c.opts.ServicePrincipal)
	if err != nil {
		return "", fmt.Errorf("hrpc: kerberos: service ticket for %s: %w", c.opts.ServicePrincipal, err)
	}
	apreq, err := spnego.NewKRB5TokenAPREQ(cl, tkt, key, []int{gssapi.ContextFlagInteg, gssapi.ContextFlagConf}, nil)
	if err != nil {
		return "", fmt.Errorf("hrpc: kerberos: %w", err)
	}
	tok, err := apreq.Marshal()
	if err != nil {
		return "", fmt.Errorf("hrpc: kerberos: %w", err)
	}
	echo := proto.Clone(auth).(*pb.RpcSaslProto_SaslAuth)
	echo.Challenge = nil
	if err := c.writeSasl(&pb.RpcSaslProto{
		State: pb.RpcSaslProto_INITIATE.Enum(),
		Token: tok,
		Auths: []*pb.RpcSaslProto_SaslAuth{echo},
	}); err != nil {
		return "", err
	}
	ch, err := c.readSasl()
	if err != nil {
		return "", err
	}
	if ch.GetState() != pb.RpcSaslProto_CHALLENGE {
		return "", fmt.Errorf("hrpc: sasl: unexpected %v after INITIATE", ch.GetState())
	}
	var offer gssapi.WrapToken
	if err := offer.Unmarshal(ch.GetToken(), true); err != nil {
		return "", fmt.Errorf("hrpc: sasl: the server's security-layer offer: %w", err)
	}
	if ok, err := offer.Verify(key, keyusage.GSSAPI_ACCEPTOR_SEAL); !ok {
		return "", fmt.Errorf("hrpc: sasl: the server's security-layer offer does not verify with the ticket's key: %v", err)
	}
	if len(offer.Payload) != 4 {
		return "", fmt.Errorf("hrpc: sasl: security-layer offer of %d bytes, want 4", len(offer.Payload))
	}
	layers := offer.Payload[0]
	prot := choose(c.opts.Protection, map[string]bool{
		ProtectAuthentication: layers&qopAuth != 0, ProtectIntegrity: layers&qopIntegrity != 0, ProtectPrivacy: layers&qopPrivacy != 0})
	if prot == "" {
		return "", fmt.Errorf("hrpc: sasl: the server offers %s (hadoop.rpc.protection), this client accepts %v", layerNames(layers), c.opts.Protection)
	}
	et, err := crypto.GetEtype(key.KeyType)
	if err != nil {
		return "", fmt.Errorf("hrpc: kerberos: %w", err)
	}
	choice := []byte{qopAuth, 0, 0, 0}
	var layer *gssLayer
	serverMax := int(offer.Payload[1])<<16 | int(offer.Payload[2])<<8 | int(offer.Payload[3])
	if prot != ProtectAuthentication {
		if serverMax < 1024 {
			return "", fmt.Errorf("hrpc: sasl: the server's largest message is %d bytes", serverMax)
		}
		layer = &gssLayer{key: key, et: et, sealed: prot == ProtectPrivacy}
		recvMax := min(c.opts.MaxFrame, 0xFFFFFF)
		choice = []byte{qopIntegrity, byte(recvMax >> 16), byte(recvMax >> 8), byte(recvMax)}
		if layer.sealed {
			choice[0] = qopPrivacy
		}
	}
	reply, err := newWrapToken(choice, key, et, 0)
	if err != nil {
		return "", fmt.Errorf("hrpc: kerberos: %w", err)
	}
	if err := c.writeSasl(&pb.RpcSaslProto{State: pb.RpcSaslProto_RESPONSE.Enum(), Token: reply}); err != nil {
		return "", err
	}
	fin, err := c.readSasl()
	if err != nil {
		return "", err
	}
	if fin.GetState() != pb.RpcSaslProto_SUCCESS {
		return "", fmt.Errorf("hrpc: sasl: unexpected %v after RESPONSE", fin.GetState())
	}
	if layer != nil {
		c.nc = &protected{Conn: c.nc, layer: layer, max: serverMax - wrapOverhead, maxFrame: c.opts.MaxFrame}
	}
	return kerberos.Name(cl), nil
}

// wrapOverhead bounds what a wrap token adds to its message: the 16-byte
// header, and for a sealed one the confounder, the header's encrypted
// copy and the checksum.
const wrapOverhead = 128

// gssLayer is GSSAPI's security layer for Kerberos 5 (RFC 4121 wrap
// tokens): integrity, or with sealed confidentiality too. Messages from
// this client are sealed or signed with the initiator's key usage and
// numbered from 1 (the handshake's reply was 0).
type gssLayer struct {
	key    types.EncryptionKey
	et     etype.EType // the key's encryption type
	sealed bool
	seq    uint64
}

// newWrapToken is an initiator's wrap token for msg: signed, not sealed.
func newWrapToken(msg []byte, key types.EncryptionKey, et etype.EType, seq uint64) ([]byte, error) {
	t := gssapi.WrapToken{Flags: 0, EC: uint16(et.GetHMACBitLength() / 8), SndSeqNum: seq, Payload: msg}
	if err := t.SetCheckSum(key, keyusage.GSSAPI_INITIATOR_SEAL); err != nil {
		return nil, err
	}
	return t.Marshal()
}

func (g *gssLayer) Wrap(msg []byte) ([]byte, error) {
	g.seq++
	if !g.sealed {
		return newWrapToken(msg, g.key, g.et, g.seq)
	}
	// Sealed (RFC 4121 §4.2.4): header, then the encryption of the message
	// followed by a copy of the header; no filler (EC 0), no rotation.
	hdr := make([]byte, 16)
	hdr[0], hdr[1], hdr[2], hdr[3] = 0x05, 0x04, 0x02, 0xFF
	binary.BigEndian.PutUint64(hdr[8:], g.seq)
	_, ct, err := g.et.EncryptMessage(g.key.KeyValue, append(append(make([]byte, 0, len(msg)+16), msg...), hdr...), keyusage.GSSAPI_INITIATOR_SEAL)
	if err != nil {
		return nil, err
	}
	return append(hdr, ct...), nil
}

func (g *gssLayer) Unwrap(tok []byte) ([]byte, error) {
	if len(tok) < 16 || tok[0] != 0x05 || tok[1] != 0x04 || tok[3] != 0xFF {
		return nil, errors.New("not a wrap token")
	}
	flags := tok[2]
	if flags&0x01 == 0 {
		return nil, errors.New("wrap token not from the server")
	}
	ec, rrc := int(binary.BigEndian.Uint16(tok[4:])), int(binary.BigEndian.Uint16(tok[6:]))
	data := tok[16:]
	if len(data) > 0 && rrc > 0 { // undo the right rotation
		r := rrc % len(data)
		data = append(append([]byte{}, data[r:]...), data[:r]...)
	}
	if flags&0x02 == 0 {
		if ec > len(data) {
			return nil, errors.New("wrap token shorter than its checksum")
		}
		t := gssapi.WrapToken{Flags: flags, EC: uint16(ec), RRC: 0, SndSeqNum: binary.BigEndian.Uint64(tok[8:]),
			Payload: data[:len(data)-ec], CheckSum: data[len(data)-ec:]}
		if ok, err := t.Verify(g.key, keyusage.GSSAPI_ACCEPTOR_SEAL); !ok {
			return nil, fmt.Errorf("wrap token does not verify: %v", err)
		}
		return t.Payload, nil
	}
	// The library slices the ciphertext by these sizes without checking.
	if len(data) < g.et.GetConfounderByteSize()+g.et.GetHMACBitLength()/8+16+ec {
		return nil, errors.New("sealed wrap token too short")
	}
	plain, err := g.et.DecryptMessage(g.key.KeyValue, data, keyusage.GSSAPI_ACCEPTOR_SEAL)
	if err != nil {
		return nil, err
	}
	if len(plain) < ec+16 {
		return nil, errors.New("sealed wrap token too short")
	}
	inner := plain[len(plain)-16:]
	if !bytes.Equal(inner[:6], tok[:6]) || !bytes.Equal(inner[8:], tok[8:16]) {
		return nil, errors.New("sealed wrap token: the encrypted header differs from the token's")
	}
	return plain[:len(plain)-ec-16], nil
}

func layerNames(mask byte) string {
	var names []string
	if mask&qopAuth != 0 {
		names = append(names, "authentication")
	}
	if mask&qopIntegrity != 0 {
		names = append(names, "integrity")
	}
	if mask&qopPrivacy != 0 {
		names = append(names, "privacy")
	}
	if len(names) == 0 {
		return fmt.Sprintf("security layers %#x", mask)
	}
	return fmt.Sprint(names)
}
