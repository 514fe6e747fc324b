package zmq

import (
	"errors"
	"time"
)

// MaxFrame bounds a frame's content on a transport with CURVE.
const MaxFrame = maxFrame

// SealedPort is the port of tr's sealed route, 0 without one.
func SealedPort(tr *Transport) uint16 { return tr.sealedPort }

// AdvertiseSealed makes tr answer port, rather than its sealed route's
// own, to a peer that asks where the route is: a test puts a proxy there.
func AdvertiseSealed(tr *Transport, port uint16) { tr.advertiseSealed.Store(uint32(port)) }

// BorrowedOut is the number of frames tr lent that were not given back.
func BorrowedOut(tr *Transport) int64 { return tr.borrowedOut.Load() }

// ReconnectIntervals are the first and the longest reconnection interval
// of tr's route to id, as its socket has them.
func ReconnectIntervals(tr *Transport, id int32) (first, most time.Duration, err error) {
	tr.mu.Lock()
	p := tr.peers[id]
	tr.mu.Unlock()
	if p == nil {
		return 0, 0, errors.New("no route")
	}
	p.sem <- struct{}{}
	defer func() { <-p.sem }()
	if first, err = p.sock.GetReconnectIvl(); err == nil {
		most, err = p.sock.GetReconnectIvlMax()
	}
	return first, most, err
}

// SealedPassword is the password of the sealed route of a job of c.
func SealedPassword(c *Curve) string {
	p, err := sealedPassword(c)
	if err != nil {
		panic(err)
	}
	return string(p)
}
