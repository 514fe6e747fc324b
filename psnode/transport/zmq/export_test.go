package zmq

// SealedPort is the port of tr's sealed route, 0 without one.
func SealedPort(tr *Transport) uint16 { return tr.sealedPort }

// AdvertiseSealed makes tr answer port, rather than its sealed route's
// own, to a peer that asks where the route is: a test puts a proxy there.
func AdvertiseSealed(tr *Transport, port uint16) { tr.advertiseSealed.Store(uint32(port)) }

// BorrowedOut is the number of frames tr lent that were not given back.
func BorrowedOut(tr *Transport) int64 { return tr.borrowedOut.Load() }
