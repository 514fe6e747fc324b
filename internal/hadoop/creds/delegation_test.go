package creds

import (
	"errors"
	"testing"
	"time"
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
	for _, v := range identifierNumbers {
		b = AppendVLong(b, v)
	}
	return b
}

// identifierNumbers are the issue and max dates, sequence number and
// master key id of delegationIdentifier.
var identifierNumbers = []int64{1795610745099, 1796215545099, 7, 2}

// numbersSize is the size of identifierNumbers[from:] in Writable form.
func numbersSize(from int) int {
	n := 0
	for _, v := range identifierNumbers[from:] {
		n += VLongSize(v)
	}
	return n
}

func TestParseDelegation(t *testing.T) {
	d, err := ParseDelegation(delegationIdentifier("alice@EXAMPLE.COM", "spindle", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := Delegation{Owner: "alice@EXAMPLE.COM", Renewer: "spindle",
		Issued: time.UnixMilli(1795610745099), Max: time.UnixMilli(1796215545099), Sequence: 7, MasterKey: 2}
	if d != want {
		t.Errorf("got %+v, want %+v", d, want)
	}
	if got := d.Max.Sub(d.Issued); got != 7*24*time.Hour {
		t.Errorf("maximum lifetime %v, want Hadoop's default of 7 days", got)
	}
	// An identifier that ends after the names has no dates.
	names := delegationIdentifier("alice", "rm", "")
	if d, err := ParseDelegation(names[:len(names)-numbersSize(0)]); err != nil || !d.Max.IsZero() || d.Owner != "alice" {
		t.Errorf("names only: %+v %v", d, err)
	}
	for name, b := range map[string][]byte{
		"empty":         nil,
		"version 1":     {1, 0, 0, 0},
		"truncated":     delegationIdentifier("alice", "rm", "")[:4],
		"negative":      {0, 0x8f, 0xff},
		"too long":      {0, 0x8c, 0x7f, 0xff, 0xff, 0xff},
		"no renewers":   {0, 1, 'a'},
		"no max date":   names[:len(names)-numbersSize(1)],
		"no key id":     names[:len(names)-1],
		"negative date": append([]byte{0, 1, 'a', 0, 0}, AppendVLong(nil, -5)...),
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
