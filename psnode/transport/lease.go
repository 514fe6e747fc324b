package transport

import (
	"sync"
	"unsafe"
)

// A transport may hand over a message whose large data frames are its own
// receive buffers rather than copies (the zmq transport does for the
// messages its Lender predicate picks): the message is then lent, and
// its receiver gives the buffers back with Release once nothing uses
// them any more, or makes the message its own with Own. Until then the
// frames stay valid; after Release the lent frames are nil.

// lease is what a lent message holds of its transport's buffers.
type lease struct {
	once    sync.Once
	frames  [][]byte // the lent frames, as the transport handed them over
	release func()
}

// Lend marks frames (some of m.Data) as the transport's memory, which
// release gives back, at most once. A message already lent is not lent
// again: release is called at once.
func (m *Message) Lend(frames [][]byte, release func()) {
	if m.lease != nil || len(frames) == 0 {
		release()
		return
	}
	m.lease = &lease{frames: frames, release: release}
}

// Lent reports whether some of m's data frames are lent by the transport.
func (m *Message) Lent() bool { return m.lease != nil }

// Release gives the lent frames back to the transport, setting the data
// frames that alias them to nil; it does nothing for a message that is
// not lent, and nothing the second time.
func (m *Message) Release() { m.endLease(func([]byte) []byte { return nil }) }

// Own copies m's lent data frames into memory of its own and gives the
// transport's back: m is then an ordinary message.
func (m *Message) Own() { m.endLease(func(d []byte) []byte { return append([]byte(nil), d...) }) }

// endLease replaces each data frame that aliases the lent frames by what
// keep makes of it, then gives the lent frames back.
func (m *Message) endLease(keep func([]byte) []byte) {
	l := m.lease
	if l == nil {
		return
	}
	m.lease = nil
	for i, d := range m.Data {
		if l.lends(d) {
			m.Data[i] = keep(d)
		}
	}
	l.once.Do(l.release)
}

// lends reports whether d is one of the lent frames (or part of one).
func (l *lease) lends(d []byte) bool {
	if len(d) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(d)))
	for _, f := range l.frames {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(f)))
		if p >= lo && p < lo+uintptr(len(f)) {
			return true
		}
	}
	return false
}
