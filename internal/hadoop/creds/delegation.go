package creds

import (
	"bytes"
	"context"
	"fmt"
	"net"
)

// Kinds of the delegation tokens a client obtains for its application.
const (
	// KindHDFSDelegation is the kind of a NameNode's delegation token.
	KindHDFSDelegation = "HDFS_DELEGATION_TOKEN"
	// KindRMDelegation is the kind of a ResourceManager's delegation token.
	KindRMDelegation = "RM_DELEGATION_TOKEN"
)

// Delegation is the start of a delegation token's identifier
// (AbstractDelegationTokenIdentifier, in Writable form): who owns the
// token, who may renew it, and the real user behind a proxy owner.
type Delegation struct {
	Owner, Renewer, RealUser string
}

// ParseDelegation reads the owner, renewer and real user from a
// delegation token's identifier; the dates and numbers after them are
// left unread.
func ParseDelegation(identifier []byte) (Delegation, error) {
	d := &decoder{r: bytes.NewReader(identifier)}
	version, err := d.r.ReadByte()
	if err != nil {
		return Delegation{}, fmt.Errorf("creds: delegation identifier: %w", ErrTruncated)
	}
	if version != 0 {
		return Delegation{}, fmt.Errorf("creds: delegation identifier version %d: %w", version, ErrVersion)
	}
	var f [3][]byte
	for i := range f {
		if f[i], err = d.bytes(); err != nil {
			return Delegation{}, fmt.Errorf("creds: delegation identifier: %w", err)
		}
	}
	return Delegation{Owner: string(f[0]), Renewer: string(f[1]), RealUser: string(f[2])}, nil
}

// Service is the service Hadoop gives a token of the server at addr
// (host:port): its IP address and port (hadoop.security.token.service.
// use_ip), an IPv4 address first, as Hadoop's clients resolve.
func Service(ctx context.Context, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if net.ParseIP(host) == nil {
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil || len(ips) == 0 {
			return "", fmt.Errorf("resolve %s: %v", host, err)
		}
		host = ips[0]
		for _, ip := range ips {
			if p := net.ParseIP(ip); p != nil && p.To4() != nil {
				host = ip
				break
			}
		}
	}
	return net.JoinHostPort(host, port), nil
}
