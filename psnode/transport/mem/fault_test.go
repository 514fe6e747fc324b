package mem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/psnode/transport/mem"
)

const (
	idA = 9
	idB = 8
	idC = 10
)

// cluster is three transports, A, B and C, each connected to the others.
type cluster struct {
	net *mem.Network
	tr  map[int32]*mem.Transport
}

func newCluster(t *testing.T, seed int64) *cluster {
	t.Helper()
	c := &cluster{net: mem.NewNetwork(seed), tr: make(map[int32]*mem.Transport)}
	addrs := make(map[int32]string)
	for _, id := range []int32{idA, idB, idC} {
		tr := c.net.NewTransport()
		t.Cleanup(func() { _ = tr.Close() })
		addr, err := tr.Listen(t.Context(), "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		c.tr[id], addrs[id] = tr, addr
	}
	for id, tr := range c.tr {
		for peer, addr := range addrs {
			if peer != id {
				if err := tr.Connect(t.Context(), peer, addr); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return c
}

func (c *cluster) send(t *testing.T, from, to, ts int32, data ...[]byte) {
	t.Helper()
	m := &transport.Message{Meta: transport.Meta{Sender: from, Recver: to, Timestamp: ts}, Data: data}
	if _, err := c.tr[from].Send(t.Context(), m); err != nil {
		t.Fatalf("Send %d→%d: %v", from, to, err)
	}
}

func (c *cluster) recv(t *testing.T, id int32) *transport.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	m, err := c.tr[id].Recv(ctx)
	if err != nil {
		t.Fatalf("Recv at %d: %v", id, err)
	}
	return m
}

// drain receives the n messages the network says it delivered to id and
// returns their (sender, timestamp) pairs.
func (c *cluster) drain(t *testing.T, id int32, n uint64) [][2]int32 {
	t.Helper()
	var got [][2]int32
	for range n {
		m := c.recv(t, id)
		got = append(got, [2]int32{m.Meta.Sender, m.Meta.Timestamp})
	}
	return got
}

func TestListenAssignsAddresses(t *testing.T) {
	t.Parallel()
	net := mem.NewNetwork(1)
	seen := make(map[string]bool)
	for range 3 {
		tr := net.NewTransport()
		t.Cleanup(func() { _ = tr.Close() })
		addr, err := tr.Listen(t.Context(), "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(addr, "mem-") || !strings.HasSuffix(addr, ":1") || seen[addr] {
			t.Fatalf("Listen = %q, want a new address mem-N:1", addr)
		}
		seen[addr] = true
	}
	// Any other port is taken as given, by one transport at a time.
	fixed := net.NewTransport()
	if addr, err := fixed.Listen(t.Context(), "mem-4:1"); err != nil || addr != "mem-4:1" {
		t.Fatalf("Listen(mem-4:1) = %q, %v", addr, err)
	}
	again := net.NewTransport()
	defer again.Close()
	if _, err := again.Listen(t.Context(), "mem-4:1"); err == nil {
		t.Fatal("two transports listen at mem-4:1")
	}
	auto := net.NewTransport()
	defer auto.Close()
	if addr, err := auto.Listen(t.Context(), "h:0"); err != nil || addr != "mem-5:1" {
		t.Fatalf("Listen(h:0) = %q, %v; want mem-5:1, skipping the taken mem-4:1", addr, err)
	}
	if err := fixed.Close(); err != nil {
		t.Fatal(err)
	}
	if addr, err := again.Listen(t.Context(), "mem-4:1"); err != nil || addr != "mem-4:1" {
		t.Fatalf("Listen(mem-4:1) after its holder closed = %q, %v", addr, err)
	}

	tr := net.NewTransport()
	defer tr.Close()
	if _, err := tr.Listen(t.Context(), "no-port"); err == nil {
		t.Fatal("Listen accepted an address without a port")
	}
	if err := tr.Connect(t.Context(), idA, "no-port"); err == nil {
		t.Fatal("Connect accepted an address without a port")
	}
}

// TestDropDeterministic checks that a seed fixes which messages a
// probabilistic Drop rule drops.
func TestDropDeterministic(t *testing.T) {
	t.Parallel()
	run := func(seed int64) [][2]int32 {
		c := newCluster(t, seed)
		c.net.Drop(idA, idB, 0.5)
		for i := range int32(200) {
			c.send(t, idA, idB, i)
		}
		st := c.net.Stats()
		if st.Sent != 200 || st.Delivered+st.Dropped != 200 {
			t.Fatalf("stats %+v, want 200 sent, each delivered or dropped", st)
		}
		if st.Dropped < 60 || st.Dropped > 140 {
			t.Fatalf("dropped %d of 200 at p=0.5", st.Dropped)
		}
		return c.drain(t, idB, st.Delivered)
	}
	first, again, other := run(7), run(7), run(8)
	if !reflect.DeepEqual(first, again) {
		t.Fatalf("the same seed delivered different messages:\n%v\n%v", first, again)
	}
	if reflect.DeepEqual(first, other) {
		t.Fatal("different seeds delivered the same messages")
	}
	for i := 1; i < len(first); i++ {
		if first[i][1] <= first[i-1][1] {
			t.Fatalf("delivered out of order: %v", first)
		}
	}
}

func TestDropRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rules func(*mem.Network)
		// want lists the pairs whose message gets through, of all six.
		want map[[2]int32]bool
	}{
		{name: "none", rules: func(*mem.Network) {}, want: map[[2]int32]bool{
			{idA, idB}: true, {idA, idC}: true, {idB, idA}: true, {idB, idC}: true, {idC, idA}: true, {idC, idB}: true,
		}},
		{name: "cut is one way", rules: func(n *mem.Network) { n.Cut(idA, idB) }, want: map[[2]int32]bool{
			{idA, idC}: true, {idB, idA}: true, {idB, idC}: true, {idC, idA}: true, {idC, idB}: true,
		}},
		{name: "drop from any", rules: func(n *mem.Network) { n.Drop(mem.Any, idB, 1) }, want: map[[2]int32]bool{
			{idA, idC}: true, {idB, idA}: true, {idB, idC}: true, {idC, idA}: true,
		}},
		{name: "drop to any", rules: func(n *mem.Network) { n.Drop(idA, mem.Any, 1) }, want: map[[2]int32]bool{
			{idB, idA}: true, {idB, idC}: true, {idC, idA}: true, {idC, idB}: true,
		}},
		{name: "isolate", rules: func(n *mem.Network) { n.Isolate(idA) }, want: map[[2]int32]bool{
			{idB, idC}: true, {idC, idB}: true,
		}},
		{name: "drop zero", rules: func(n *mem.Network) { n.Drop(mem.Any, mem.Any, 0) }, want: map[[2]int32]bool{
			{idA, idB}: true, {idA, idC}: true, {idB, idA}: true, {idB, idC}: true, {idC, idA}: true, {idC, idB}: true,
		}},
		{name: "replaced rule", rules: func(n *mem.Network) { n.Cut(idA, idB); n.Drop(idA, idB, 0) }, want: map[[2]int32]bool{
			{idA, idB}: true, {idA, idC}: true, {idB, idA}: true, {idB, idC}: true, {idC, idA}: true, {idC, idB}: true,
		}},
		{name: "heal", rules: func(n *mem.Network) { n.Isolate(idA); n.Cut(idB, idC); n.Heal() }, want: map[[2]int32]bool{
			{idA, idB}: true, {idA, idC}: true, {idB, idA}: true, {idB, idC}: true, {idC, idA}: true, {idC, idB}: true,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, 1)
			tt.rules(c.net)
			ids := []int32{idA, idB, idC}
			for _, from := range ids {
				for _, to := range ids {
					if from != to {
						c.send(t, from, to, 0)
					}
				}
			}
			got := make(map[[2]int32]bool)
			st := c.net.Stats()
			for _, to := range ids {
				for _, p := range c.drain(t, to, uint64(c.tr[to].Pending())) {
					got[[2]int32{p[0], to}] = true
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("delivered %v, want %v", got, tt.want)
			}
			if st.Dropped != uint64(6-len(tt.want)) {
				t.Fatalf("stats %+v, want %d dropped", st, 6-len(tt.want))
			}
		})
	}
}

func TestDuplicate(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.net.Duplicate(idA, idB, 1)
	c.send(t, idA, idB, 1, []byte{1, 2})
	c.send(t, idA, idB, 2)
	c.send(t, idC, idB, 3)
	var got []int32
	for range 5 {
		got = append(got, c.recv(t, idB).Meta.Timestamp)
	}
	if want := []int32{1, 1, 2, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("received timestamps %v, want %v", got, want)
	}
	if st := c.net.Stats(); st.Duplicated != 2 || st.Delivered != 5 {
		t.Fatalf("stats %+v, want 2 duplicated and 5 delivered", st)
	}
}

func TestDuplicatesDoNotShareBuffers(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.net.Duplicate(mem.Any, mem.Any, 1)
	data := []byte{1, 2, 3}
	c.send(t, idA, idB, 1, data, []byte{4})
	data[0] = 9 // the sender reuses its buffer
	m1, m2 := c.recv(t, idB), c.recv(t, idB)
	m1.Data[0][1] = 7
	m1.Data[0] = append(m1.Data[0], 8) // must not run into frame 1
	if !bytes.Equal(m2.Data[0], []byte{1, 2, 3}) || !bytes.Equal(m1.Data[1], []byte{4}) {
		t.Fatalf("copies share buffers: %v %v", m1.Data, m2.Data)
	}
}

// TestDelay checks that delayed messages arrive no earlier than their
// delay, in order, and after undelayed ones sent later.
func TestDelay(t *testing.T) {
	t.Parallel()
	const d = 300 * time.Millisecond
	c := newCluster(t, 1)
	c.net.Delay(idA, idB, d)
	start := time.Now()
	for i := range int32(3) {
		c.send(t, idA, idB, i)
	}
	c.send(t, idC, idB, 10)
	first := c.recv(t, idB)
	// Only if the delay had not run out before C's message was sent
	// must C's message be first.
	if time.Since(start) < d && first.Meta.Sender != idC {
		t.Fatalf("first message %v, want C's undelayed one", first)
	}
	var got []int32
	for len(got) < 3 {
		m := first
		if m == nil || m.Meta.Sender == idC {
			m = c.recv(t, idB)
		}
		first = nil
		if m.Meta.Sender == idA {
			got = append(got, m.Meta.Timestamp)
		}
	}
	if elapsed := time.Since(start); elapsed < d {
		t.Fatalf("delayed messages arrived after %v, want at least %v", elapsed, d)
	}
	if !slices.Equal(got, []int32{0, 1, 2}) {
		t.Fatalf("delayed messages arrived as %v, want [0 1 2]", got)
	}
	if st := c.net.Stats(); st.Delayed != 3 || st.Delivered != 4 {
		t.Fatalf("stats %+v, want 3 delayed, 4 delivered", st)
	}
}

// TestDelayedLostOnClose checks that Close stops the timers of messages
// delayed on their way to the transport.
func TestDelayedLostOnClose(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	c := newCluster(t, 1)
	c.net.Delay(mem.Any, idB, time.Hour)
	c.net.Duplicate(mem.Any, idB, 1)
	c.send(t, idA, idB, 1)
	if err := c.tr[idB].Close(); err != nil {
		t.Fatal(err)
	}
	if st := c.net.Stats(); st.Lost != 2 || st.Delivered != 0 {
		t.Fatalf("stats %+v, want the message and its duplicate lost", st)
	}
	for _, tr := range c.tr {
		_ = tr.Close()
	}
	goleak.VerifyNone(t, ignore)
}

func TestHook(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	var seen []transport.Meta // the hook runs on this goroutine, in Send
	c.net.Hook(func(m *transport.Message) bool {
		seen = append(seen, m.Meta)
		if len(m.Data) > 0 {
			m.Data[0][0] = 0xff // corrupt the receiver's copy
		}
		return m.Meta.Timestamp%2 == 0
	})
	data := []byte{1}
	for i := range int32(4) {
		c.send(t, idA, idB, i, data)
	}
	if len(seen) != 4 || seen[3].Timestamp != 3 || seen[3].Sender != idA {
		t.Fatalf("hook saw %+v", seen)
	}
	if data[0] != 1 {
		t.Fatal("the hook modified the sender's buffer")
	}
	for _, want := range []int32{0, 2} {
		m := c.recv(t, idB)
		if m.Meta.Timestamp != want || m.Data[0][0] != 0xff {
			t.Fatalf("received %v %v, want timestamp %d with a corrupted frame", m, m.Data, want)
		}
	}
	if st := c.net.Stats(); st.Dropped != 2 {
		t.Fatalf("stats %+v, want 2 dropped by the hook", st)
	}
	c.net.Heal()
	c.send(t, idA, idB, 5)
	if m := c.recv(t, idB); m.Meta.Timestamp != 5 {
		t.Fatalf("after Heal received %v", m)
	}
}

func TestQueueFull(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	for i := range int32(mem.InboxSize) {
		c.send(t, idA, idB, i)
	}
	m := &transport.Message{Meta: transport.Meta{Sender: idA, Recver: idB}}
	if _, err := c.tr[idA].Send(t.Context(), m); !errors.Is(err, mem.ErrQueueFull) {
		t.Fatalf("Send to a full inbox = %v, want ErrQueueFull", err)
	}
	if st := c.net.Stats(); st.QueueFull != 1 {
		t.Fatalf("stats %+v, want one queue-full", st)
	}
	c.recv(t, idB)
	if _, err := c.tr[idA].Send(t.Context(), m); err != nil {
		t.Fatalf("Send after Recv made room: %v", err)
	}
}

func TestSendToNobody(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	if err := c.tr[idA].Connect(t.Context(), 99, "mem-999:1"); err != nil {
		t.Fatal(err)
	}
	c.send(t, idA, 99, 1)
	if st := c.net.Stats(); st.Lost != 1 {
		t.Fatalf("stats %+v, want one lost", st)
	}
}

func BenchmarkRoundTrip(b *testing.B) {
	for _, size := range []int{0, 1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			net := mem.NewNetwork(1)
			a, s := net.NewTransport(), net.NewTransport()
			defer a.Close()
			defer s.Close()
			addr, err := s.Listen(b.Context(), "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			if err := a.Connect(b.Context(), idB, addr); err != nil {
				b.Fatal(err)
			}
			m := &transport.Message{Meta: transport.Meta{Sender: idA, Recver: idB, Push: true, Request: true,
				DataTypes: []transport.DataType{transport.TypeChar}}, Data: [][]byte{make([]byte, size)}}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			ctx := b.Context()
			for b.Loop() {
				if _, err := a.Send(ctx, m); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Recv(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(1, "copies/op")
		})
	}
}
