package psnode

import (
	"bytes"
	"slices"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/psnode/store"
	"github.com/spindle-ps/spindle/psnode/transport"
)

func TestReplHeaderRoundTrip(t *testing.T) {
	for _, h := range []replHeader{
		{},
		{App: tableAppBase | 7, Part: 2, Seq: 1 << 40, Inc: -3, Epoch: MaxSyncEpochs - 1, Step: MaxSyncSteps, Worker: 11, Timestamp: -1},
	} {
		got, err := decodeReplHeader(h.encode())
		if err != nil || got != h {
			t.Errorf("%+v decoded as %+v (%v)", h, got, err)
		}
	}
	for _, b := range [][]byte{nil, make([]byte, replHeaderLen-1), make([]byte, replHeaderLen+1),
		replHeader{Part: -1}.encode(), replHeader{Epoch: MaxSyncEpochs}.encode(), replHeader{Step: MaxSyncSteps + 1}.encode()} {
		if _, err := decodeReplHeader(b); err == nil {
			t.Errorf("header %x accepted", b)
		}
	}
}

// FuzzReplHeader: any body decodes without panicking, and a decoded
// header encodes back to the same bytes.
func FuzzReplHeader(f *testing.F) {
	f.Add(replHeader{App: 1 << 30, Part: 1, Seq: 9, Inc: 5, Epoch: 2, Step: 3, Worker: -1, Timestamp: -1}.encode())
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeReplHeader(b)
		if err != nil {
			return
		}
		if !bytes.Equal(h.encode(), b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, h, h.encode())
		}
	})
}

func TestRecentPushes(t *testing.T) {
	var r recentPushes
	for ts := int32(0); ts < recentPerWorker+10; ts++ {
		r.add(9, ts)
	}
	r.add(11, -7)
	if r.has(9, 9) || !r.has(9, 10) || !r.has(9, recentPerWorker+9) || !r.has(11, -7) || r.has(11, 0) {
		t.Fatalf("remembered %v: want worker 9's last %d and worker 11's one", r.by, recentPerWorker)
	}
	back, err := decodeRecent(r.encode())
	if err != nil || !slices.Equal(back.by[9], r.by[9]) || !slices.Equal(back.by[11], r.by[11]) {
		t.Fatalf("round trip %v, want %v (%v)", back.by, r.by, err)
	}
	if _, err := decodeRecent([]int32{1, 2, 3}); err == nil {
		t.Error("an odd number of values decoded")
	}
}

// TestReplicaAppliesInSeqOrder: a replica applies its partition's updates
// in seq order whatever their order of arrival, ignores one it has, and
// applies nothing before it is restored.
func TestReplicaAppliesInSeqOrder(t *testing.T) {
	n := &Node{log: logrus.NewEntry(logrus.New())}
	tab := &Table[float32]{ts: &Tables{n: n}, desc: tableDesc{Name: "w"}}
	st, err := NewStoreHandler[float32](store.Sum[float32]{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := &replicaPart[float32]{store: st, early: make(map[uint64]replUpdate[float32])}
	r := &tableRepl[float32]{t: tab, parts: map[int]*replicaPart[float32]{1: p}}
	update := func(seq uint64, step int32, v float32) {
		t.Helper()
		m := &transport.Message{Meta: transport.Meta{Push: true, Head: replApply}, Data: [][]byte{asBytes([]uint64{5}), asBytes([]float32{v})}}
		if err := r.replicaUpdate(replHeader{Part: 1, Seq: seq, Epoch: 0, Step: step, Worker: -1, Timestamp: -1}, m); err != nil {
			t.Fatal(err)
		}
	}
	value := func() float32 {
		v, _ := st.Get(5)
		if len(v) == 0 {
			return 0
		}
		return v[0]
	}
	update(2, 2, 10)
	update(1, 1, 1)
	if got := value(); got != 0 {
		t.Fatalf("a replica not yet restored applied updates: value %v", got)
	}
	p.mu.Lock()
	p.ready = true
	if err := r.drainLocked(p); err != nil {
		t.Fatal(err)
	}
	p.mu.Unlock()
	if got := value(); got != 11 {
		t.Fatalf("value %v after updates 1 and 2, want 11", got)
	}
	update(4, 4, 1000)
	update(2, 2, 10) // had it
	if got := value(); got != 11 {
		t.Fatalf("value %v with update 3 missing, want 11: update 4 must wait, 2 not apply twice", got)
	}
	update(3, 3, 100)
	if got := value(); got != 1111 || p.state.seq != 4 || p.state.steps != 4 {
		t.Fatalf("value %v at seq %d, step %d; want 1111 at 4, 4", got, p.state.seq, p.state.steps)
	}
	m := &transport.Message{Meta: transport.Meta{Head: replEnded}}
	if err := r.replicaUpdate(replHeader{Part: 1, Seq: 5, Epoch: 0, Worker: -1, Timestamp: -1}, m); err != nil {
		t.Fatal(err)
	}
	if p.state.ended != 1 || p.state.steps != 0 {
		t.Fatalf("after the end of epoch 0: %+v, want epoch 1 running, no step applied", p.state)
	}
	if err := r.replicaUpdate(replHeader{Part: 0, Seq: 1}, m); err == nil {
		t.Error("an update of a partition the server keeps no replica of was accepted")
	}
}
