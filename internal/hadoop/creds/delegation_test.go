package creds

import (
	"errors"
	"testing"
)

// delegationIdentifier is the Writable form of a delegation token's
// identifier: version, owner, renewer, real user, issue and max dates,
// sequence number, master key id.
func delegationIdentifier(owner, renewer, real string) []byte {
	b := []byte{0}
	for _, s := range []string{owner, renewer, real} {
		b = AppendVLong(b, int64(len(s)))
		b = append(b, s...)
	}
	for _, v := range []int64{1795610745099, 1796215545099, 7, 2} {
		b = AppendVLong(b, v)
	}
	return b
}

func TestParseDelegation(t *testing.T) {
	d, err := ParseDelegation(delegationIdentifier("alice@EXAMPLE.COM", "spindle", ""))
	if err != nil {
		t.Fatal(err)
	}
	if d != (Delegation{Owner: "alice@EXAMPLE.COM", Renewer: "spindle"}) {
		t.Errorf("got %+v", d)
	}
	for name, b := range map[string][]byte{
		"empty":       nil,
		"version 1":   {1, 0, 0, 0},
		"truncated":   delegationIdentifier("alice", "rm", "")[:4],
		"negative":    {0, 0x8f, 0xff},
		"too long":    {0, 0x8c, 0x7f, 0xff, 0xff, 0xff},
		"no renewers": {0, 1, 'a'},
	} {
		if _, err := ParseDelegation(b); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %v is none of the package's errors", name, err)
		}
	}
}

func FuzzParseDelegation(f *testing.F) {
	f.Add(delegationIdentifier("alice@EXAMPLE.COM", "rm", ""))
	f.Add([]byte{0, 0x8c, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDelegation(b)
		if err == nil && len(d.Owner)+len(d.Renewer)+len(d.RealUser) > len(b) {
			t.Fatalf("parsed %d bytes of names from %d bytes", len(d.Owner)+len(d.Renewer)+len(d.RealUser), len(b))
		}
	})
}
