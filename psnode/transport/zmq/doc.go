// Package zmq is the ZeroMQ implementation of transport.Transport (the
// van of ps-lite), over github.com/pebbe/zmq4. It is the only package of
// Spindle that links libzmq and uses cgo.
//
// # Sockets
//
// Each Transport has its own ZeroMQ context, so that Close can terminate
// it. Listen binds one ROUTER socket, which a single receive goroutine
// owns; Connect opens one DEALER socket per peer, connected to the peer's
// ROUTER. ZeroMQ sockets are not safe for concurrent use: each DEALER is
// guarded by its own lock, and no lock of the whole transport is held
// during socket I/O, so a slow peer holds up only the Sends addressed to
// it. Every socket has ZMQ_LINGER 0.
//
// # Wire format
//
// A message is one ZeroMQ multipart message; the ROUTER prepends the
// identity of the connection on receipt:
//
//	sent by the DEALER:      [meta][data0]…[dataN]
//	received by the ROUTER:  [identity][meta][data0]…[dataN]
//
// meta is transport.AppendMeta's Thrift compact encoding; data frames are
// the raw bytes of Message.Data. The sender is Meta.Sender, not the
// identity, which is ZeroMQ's arbitrary name for the connection. A
// received message whose meta does not decode, whose data frames fail
// transport.CheckData, or that has more than transport.MaxDataFrames
// frames is dropped, counted in Stats.Malformed and logged at debug
// level; Recv never returns it.
//
// A message of less than 64 KiB in all goes packed into one frame once
// the peer has said it reads packed messages (packed.go): each frame is a
// ZeroMQ message of its own on both sides, and with CURVE its own
// encryption and MAC.
//
//	packed:  [0x00 'p'][n][len(meta)][len(data0)]…[meta][data0]…[dataN]
//
// The receiver's data frames are slices of that one frame. A sender asks
// with the first message on every new connection (a frame that is not a
// meta); the peer answers on the same connection, and with the port of its
// sealed route (below). A peer that does not answer, an older one, gets
// messages as before.
//
// # Receiving
//
// pebbe/zmq4 makes the sockets and does everything but reading the
// ROUTER, which the receive loop does with direct calls into libzmq on the
// same socket: two cgo calls a frame (receive; copy into a new Go buffer,
// which the message then owns, and close) instead of pebbe/zmq4's five.
// A frame of 4 MiB or more is copied in parts, one goroutine per
// processor, each part's pages populated in one madvise call first: the
// buffer is fresh, and faulting it in page by page cost more than the
// copy.
//
// Or it is not copied at all: SetLender names the messages (psnode: the
// requests to a KVServer, whose handler keeps nothing of them past its
// return) whose large frames are handed over as libzmq's own buffers. The
// message is then lent (transport.Message.Lend): its receiver gives the
// buffers back with Release, or copies them with Own. A lent message that
// the transport drops, or still holds when it closes, it releases itself.
// Stats.Borrowed counts the frames lent.
//
// The receive loop waits for messages in zmq_poll, a C call, which keeps
// the loop's P of the Go scheduler while it waits. Were every P so held,
// the goroutines the loops woke would wait, the CPUs idle, until the
// runtime took one back. So each listening Transport raises GOMAXPROCS
// by one, and Close lowers it again (procs.go); the parallel copies and
// ciphers count the CPUs without those Ps. A program that sets GOMAXPROCS
// while transports listen finds it one lower for each that closes.
//
// # Sending large frames
//
// Send hands small frames to zmq_send, which copies them. A data frame of
// 64 KiB or more is lent instead (zmq_msg_init_data): libzmq writes it to
// the connection from the caller's memory, pinned meanwhile, and hands it
// back through a free function, which queues it for a goroutine rather
// than calling into Go from libzmq's I/O thread (handback.go); Send
// returns once every lent frame is back, so the caller may reuse its
// buffers as with a copy. Frames are lent only while the DEALER has a
// connection, which a socket monitor reports; otherwise they are copied
// and queued like small ones. A connection that breaks while lent frames
// wait has a second to come back, and the message goes out on it then.
// If it does not, or the route is replaced, the DEALER is closed with its
// queue, which hands the frames back, and the message is lost as ZeroMQ
// loses one it was writing when a connection breaks (Send succeeds; the
// route reconnects for the next Send). If the context ends first, the
// same happens and Send returns the context's error.
//
// # Sealed frames
//
// With Options.Curve every connection is CURVE, whose cipher keeps about
// a quarter of plain ZeroMQ's goodput on large messages. Data frames of
// 64 KiB or more therefore go on a second connection to the peer, the
// sealed route: a ROUTER without ZeroMQ's cipher, bound beside the
// CURVE ROUTER (another TCP port on the same host, or the socket file
// <port>.sealed in Local mode), which a sender learns of by asking on its
// CURVE connection. It is a PLAIN server that admits only a client with
// the route's password, derived from the job's keys, so that a stranger
// cannot even open it. Each such frame is sealed with AES-128-GCM under a key
// drawn for its message alone; the key and a random tag naming the sealed
// frames travel in an envelope frame before the meta, on the CURVE
// connection, where the sealed frames' places are left empty:
//
//	CURVE route:   [envelope: tag, key, (index, length)…][meta][data0]…[dataN]
//	sealed route:  [tag][sealed frame]…
//
// The receive loop joins the two by the tag, opens the sealed frames,
// and delivers the message in its place among its connection's messages.
// A message the lender picks borrows its frames opened in place, in the
// libzmq buffers that brought them, as it would a plain connection's;
// the others' open into new Go memory. Only a peer that passed
// CURVE's authentication can have a sealed frame accepted, nobody else can
// read one, and one altered, cut, moved or replayed is dropped with its
// message. Until the route is known or while it has no connection, whole
// messages go through CURVE. Options.NoSealed turns the sealed route off.
// sealed.go and curve.go have the details, and the bounds on what a
// connection to the sealed route can make the receiver hold.
//
// # Bounded frames
//
// libzmq reads a frame whole before anything checks it, a handshake's
// first frame included, so with no bound a stranger who reached a port
// could make a node hold as much as it sent in one frame. With
// Options.Curve every socket takes frames of a bounded size
// (ZMQ_MAXMSGSIZE): the ROUTERs 16 MiB of content (the largest meta), the
// DEALERs, which only read the answer to their question, 64 KiB. A
// connection that announces more is closed at once. A node keeps to the
// bound in what it sends: a longer data frame is pieced on the sealed
// route (pieces of whole chunks) and split through CURVE, its pieces in
// its place and a frame before the meta naming it, and the receiver joins
// them into new memory (split.go).
//
// # Addresses
//
// Listen takes and returns "host:port". Connect takes "host:port",
// which means tcp://host:port, or a ZeroMQ endpoint "tcp://…" or "ipc://…"
// used as it is.
//
// With Options.Local, nodes on one machine talk over ipc:// endpoints
// (ps-lite's DMLC_LOCAL). Addresses still have the form "host:port", so
// they fit transport.Node: the port names the endpoint
// <IPCDir>/<port>.ipc and the host is ignored. Listen on port 0 claims an
// unused port number between 40000 and 60000 (a name only: no TCP port is
// bound) and returns it, for example "127.0.0.1:41234"; Connect on any
// Local transport with the same IPCDir, in this process or another,
// reaches it. A port is claimed with a flock on <IPCDir>/<port>.lock for
// as long as the transport is open, so two live transports never share
// an endpoint; Close removes the port's files.
//
// # Flow control
//
// A Send that finds the peer's queue at its high-water mark
// (Options.WaterMark) waits for room in zmq_poll, looking at its context
// and at Close every pollInterval, so it never blocks past its context,
// even when the peer is gone. ZeroMQ queues messages for a peer that is
// not (yet, or any longer) connected, and reconnects by itself: a
// successful Send does not mean the peer received the message.
//
// Received messages wait in an inbox of Options.InboxSize messages. When
// Recv falls behind and the inbox fills, the receive loop stops reading,
// and back-pressure reaches the senders through ZeroMQ's queues and TCP.
//
// # Shutdown
//
// Close refuses new calls, wakes the receive loop through an inproc
// socket pair and waits for it, closes every DEALER (a Send waiting for
// room gives up within pollInterval), and terminates the context. With
// linger 0 nothing waits for a peer, so Close returns promptly even with
// messages queued for a dead one, and leaves no goroutine behind.
package zmq
