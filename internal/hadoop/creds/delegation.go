package creds

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"time"
)

// Kinds of the delegation tokens a client obtains for its application.
const (
	// KindHDFSDelegation is the kind of a NameNode's delegation token.
	KindHDFSDelegation = "HDFS_DELEGATION_TOKEN"
	// KindRMDelegation is the kind of a ResourceManager's delegation token.
	KindRMDelegation = "RM_DELEGATION_TOKEN"
)

// Delegation is a delegation token's identifier
// (AbstractDelegationTokenIdentifier, in Writable form): who owns the
// token, who may renew it, the real user behind a proxy owner, and when
// it was issued and stops being renewable.
type Delegation struct {
	Owner, Renewer, RealUser string
	// Issued and Max are the issue date and the maximum date, past which
	// no renewal extends the token; zero when the identifier ends after
	// the names.
	Issued, Max time.Time
	// Sequence is the token's number at its issuer, MasterKey the id of
	// the key that signed it.
	Sequence, MasterKey int32
}

// ParseDelegation reads a delegation token's identifier.
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
	dl := Delegation{Owner: string(f[0]), Renewer: string(f[1]), RealUser: string(f[2])}
	if d.r.Len() == 0 {
		return dl, nil
	}
	var dates [2]int64
	for i := range dates {
		v, err := d.vlong()
		if err != nil {
			return Delegation{}, fmt.Errorf("creds: delegation identifier dates: %w", err)
		}
		if v < 0 {
			return Delegation{}, fmt.Errorf("creds: delegation identifier date %d: %w", v, ErrMalformed)
		}
		dates[i] = v
	}
	dl.Issued, dl.Max = time.UnixMilli(dates[0]), time.UnixMilli(dates[1])
	if dl.Sequence, err = d.vint(); err != nil {
		return Delegation{}, fmt.Errorf("creds: delegation identifier sequence number: %w", err)
	}
	if dl.MasterKey, err = d.vint(); err != nil {
		return Delegation{}, fmt.Errorf("creds: delegation identifier master key: %w", err)
	}
	return dl, nil
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
