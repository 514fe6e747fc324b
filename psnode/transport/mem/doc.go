// Package mem is an in-memory implementation of transport.Transport for
// unit tests, with deterministic fault injection, after etcd-raft's test
// network and hashicorp/raft's InmemTransport.
//
// A Network connects the transports it creates. Every message sent through
// it is encoded and decoded with the real codec, so the receiver never
// shares a buffer with the sender, and it passes the network's rules:
//
//	net := mem.NewNetwork(1)           // all random choices seeded with 1
//	a, b := net.NewTransport(), net.NewTransport()
//	addr, _ := b.Listen(ctx, "127.0.0.1:0") // port 0: assigned, "mem-1:1"
//	_ = a.Connect(ctx, 8, addr)
//	net.Drop(9, 8, 0.1)                // drop 10% of 9→8 (ids from Meta)
//	net.Delay(mem.Any, 8, 50*time.Millisecond)
//	net.Isolate(11)                    // nothing to or from 11
//	net.Hook(func(m *transport.Message) bool { return m.Meta.Control.Cmd != transport.CmdAck })
//	net.Heal()                         // back to a perfect network
//
// Listen with a port other than 0 takes the address as given, so that a
// scheduler can listen at the root address its nodes are configured with.
//
// Rules match on Meta.Sender and Meta.Recver, with Any as a wildcard. The
// random draws are made in a fixed order under one lock, so a test whose
// messages are sent in the same order sees the same drops and duplicates
// on every run. Stats counts what happened to each message.
//
// Send never blocks. Each transport's inbox holds InboxSize messages; Send
// to a full inbox fails with an error wrapping ErrQueueFull, while Send to
// an address where nobody listens is silently lost, as on a real network.
package mem
