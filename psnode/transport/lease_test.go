package transport

import (
	"bytes"
	"testing"
)

// TestLease: a lent message gives its frames back exactly once, by
// Release (the lent frames become nil, the others stay) or by Own (the
// lent frames become copies); a second lease is given back at once.
func TestLease(t *testing.T) {
	lent := []byte("lent frame")
	mine := []byte("own frame")
	mk := func(released *int) *Message {
		m := &Message{Data: [][]byte{mine, lent[:4]}}
		m.Lend([][]byte{lent}, func() { *released++ })
		return m
	}
	var n int
	m := mk(&n)
	if !m.Lent() {
		t.Fatal("not lent")
	}
	m.Release()
	m.Release()
	if n != 1 || m.Lent() || m.Data[1] != nil || !bytes.Equal(m.Data[0], mine) {
		t.Errorf("Release: given back %d times, lent %v, frames %q", n, m.Lent(), m.Data)
	}
	n = 0
	m = mk(&n)
	m.Own()
	m.Release()
	if n != 1 || m.Lent() || !bytes.Equal(m.Data[1], []byte("lent")) || &m.Data[1][0] == &lent[0] {
		t.Errorf("Own: given back %d times, lent %v, frames %q", n, m.Lent(), m.Data)
	}
	n = 0
	var second int
	m = mk(&n)
	m.Lend([][]byte{mine}, func() { second++ })
	if second != 1 || n != 0 {
		t.Errorf("a second lease: given back %d times at once, the first %d times", second, n)
	}
	m.Release()
	if n != 1 || m.Data[0] == nil {
		t.Errorf("Release gave back the first lease %d times, frames %q", n, m.Data)
	}
	var none Message
	none.Release()
	none.Own()
}
