// Package transport defines how psnode messages move between the nodes of
// a job: the Message type, its wire codec, and the Transport interface
// that the runtime drives. It does not import ZeroMQ; implementations live
// in subpackages:
//
//   - transport/zmq, the real one over ZeroMQ (the only cgo package);
//   - transport/mem, in memory with seeded fault injection, for tests;
//   - transport/transporttest, the conformance suite both pass.
//
// # Messages
//
// A Message is a Meta and zero or more data frames. On the wire it is a
// multipart message [meta][data0]…[dataN]; AppendMeta and DecodeMeta
// encode and decode the meta frame (a Thrift compact struct whose schema
// is internal/wire/meta.thrift), and CheckData checks the data frames
// against it. The codec is pure: no I/O, and no state shared between
// calls beyond pooled scratch space.
//
// Everything a peer sends is bounded before it is trusted: DecodeMeta
// never panics, bounds what it allocates by its input and the limits
// MaxMetaSize, MaxDataFrames and MaxNodes, and returns errors wrapping
// ErrMalformed. Transports drop malformed input rather than return it.
//
// # Ownership
//
// Send does not retain the message it is given. Recv hands its message to
// the caller, whose data frames may be the transport's receive buffers:
// they are the caller's to keep or modify, and are never reused by the
// transport.
package transport
