package hrpc

import (
	"errors"
	"fmt"

	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"google.golang.org/protobuf/proto"

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
//	C: RESPONSE token=<wrap token from the initiator: layer chosen (none), size 0>
//	S: SUCCESS
//
// The server's wrap token is sealed with the ticket's session key, which
// only the real service could have read from the ticket: checking it
// authenticates the server. It returns the client's principal, the user
// the connection context names.
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
	if layers := offer.Payload[0]; layers&qopAuth == 0 {
		return "", fmt.Errorf("hrpc: sasl: the server requires %s (hadoop.rpc.protection); this client supports authentication only", layerNames(layers))
	}
	choice, err := gssapi.NewInitiatorWrapToken([]byte{qopAuth, 0, 0, 0}, key)
	if err != nil {
		return "", fmt.Errorf("hrpc: kerberos: %w", err)
	}
	resp, err := choice.Marshal()
	if err != nil {
		return "", fmt.Errorf("hrpc: kerberos: %w", err)
	}
	if err := c.writeSasl(&pb.RpcSaslProto{State: pb.RpcSaslProto_RESPONSE.Enum(), Token: resp}); err != nil {
		return "", err
	}
	fin, err := c.readSasl()
	if err != nil {
		return "", err
	}
	if fin.GetState() != pb.RpcSaslProto_SUCCESS {
		return "", fmt.Errorf("hrpc: sasl: unexpected %v after RESPONSE", fin.GetState())
	}
	return cl.Credentials.CName().PrincipalNameString() + "@" + cl.Credentials.Realm(), nil
}

func layerNames(mask byte) string {
	var names []string
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
