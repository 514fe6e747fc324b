package psnode

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/psnode/store"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// The requests FuzzPeerFrames makes of a server.
const (
	peerCtl      = iota // a request of the tables' control app (serveCtl)
	peerSync            // a push or pull to a synchronous table
	peerSSP             // a push or pull to a bounded-delay table
	peerSnapshot        // a replica's snapshot answer (installSnapshot)
	peerRejoin          // a rejoin request's steps for a synchronous table
	peerKinds
)

type peerSeed struct{ fuzzSeed }

func (s *peerSeed) req(kind byte, sender, head int32, flags byte, body []byte, frames ...[]byte) *peerSeed {
	s.u8(kind).i32(sender).i32(head).u8(flags).u8(byte(len(body)))
	s.b = append(s.b, body...)
	s.u8(byte(len(frames)))
	for _, f := range frames {
		s.u8(byte(len(f)))
		s.b = append(s.b, f...)
	}
	return s
}

func peerSeeds() [][]byte {
	js := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return b
	}
	w0, w1 := transport.WorkerID(0), transport.WorkerID(1)
	keys := asBytes([]uint64{1, 2})
	vals := asBytes([]float32{0.5, 1.5})
	step := func(e, s int) int32 { c, _ := SyncStep(e, s); return c }
	done := func(e int) int32 { c, _ := SyncDone(e); return c }
	push, pull := byte(1), byte(2)
	var seeds [][]byte
	add := func(s *peerSeed) { seeds = append(seeds, s.b) }
	s := &peerSeed{}
	s.req(peerCtl, w0, ctlRejoin, 0, js(rejoinRequest{Probe: true}))
	s.req(peerCtl, w0, ctlRejoin, 0, js(rejoinRequest{Epoch: 0, From: 3, Steps: map[string]int{"w": 4}}))
	s.req(peerCtl, w1, ctlScaleMove, 0, js(scaleRequest{From: 2, To: 3, FromWorkers: 2, Workers: 2}))
	s.req(peerCtl, w1, ctlScaleSettle, 0, js(scaleRequest{From: 2, To: 3, FromWorkers: 2, Workers: 2}))
	s.req(peerCtl, w0, ctlCheckpoint, 0, js(ckptRequest{N: 1}))
	add(s)
	s = &peerSeed{}
	s.req(peerSync, w0, step(0, 0), push, nil, keys, vals)
	s.req(peerSync, w1, step(0, 0), push, nil, keys, vals)
	s.req(peerSync, w0, step(0, 1), pull, nil, keys)
	s.req(peerSync, w0, done(0), push, nil)
	s.req(peerSync, w1, done(0), push, nil)
	add(s)
	s = &peerSeed{}
	s.req(peerSync, w0, step(0, 0), push, nil, keys, vals)
	s.req(peerRejoin, w1, 0, 0, js(rejoinRequest{Probe: true}))
	s.req(peerSync, w0, step(0, 1), push, nil, keys, vals)
	s.req(peerRejoin, w1, 0, 0, js(rejoinRequest{Epoch: 0, From: 1, Steps: map[string]int{"w": 2}}))
	s.req(peerSync, w1, step(0, 2), push, nil, keys, vals)
	s.req(peerSync, w0, step(0, 2), push, nil, keys, vals)
	add(s)
	s = &peerSeed{}
	s.req(peerSSP, w0, sspCommand(Clock{0, 3}), pull, nil, keys)
	s.req(peerSSP, w1, sspCommand(Clock{0, 0}), push, nil, keys, vals)
	s.req(peerSSP, w1, sspIdleCommand(0), push, nil)
	s.req(peerSSP, w0, 0, push, nil, keys, vals)
	add(s)
	s = &peerSeed{}
	s.req(peerSnapshot, transport.ServerID(1), 0, 0, nil, keys, vals, nil, asBytes([]int32{9, 1, 9, 2, 11, -7}))
	add(s)
	return seeds
}

// FuzzPeerFrames: what a server parses of its peers' requests (the
// bodies of rejoin, rescale and checkpoint requests, the commands of
// synchronous and bounded-delay pushes and pulls, the frames of a
// replica's snapshot) is checked without a panic, and the server answers
// and stays usable.
func FuzzPeerFrames(f *testing.F) {
	for _, s := range peerSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := fuzzNode(t, fuzzServerRunning, "", false)
		defer n.Close()
		ts, err := NewTables(n, TablesOptions{IOTimeout: 2 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		syncStore, err := NewStoreHandler[float32](store.Sum[float32]{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		syncH, err := NewSyncHandler(syncStore, n.NumWorkers())
		if err != nil {
			t.Fatal(err)
		}
		syncSrv, err := NewKVServer(n, 1, syncH.Handle)
		if err != nil {
			t.Fatal(err)
		}
		sspStore, err := NewStoreHandler[float32](store.Sum[float32]{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		sspH, err := NewSSPHandler(sspStore, n.NumWorkers(), 1)
		if err != nil {
			t.Fatal(err)
		}
		sspSrv, err := NewKVServer(n, 2, sspH.Handle)
		if err != nil {
			t.Fatal(err)
		}
		r := &fuzzBytes{b: b}
		for i := 0; r.more() && i < 64; i++ {
			kind := int(r.u8()) % peerKinds
			sender, head, flags := r.i32(), r.i32(), r.u8()
			body := r.bytes()
			var frames [][]byte
			var types []transport.DataType
			for j := range int(r.u8()) % 5 {
				frames = append(frames, r.bytes())
				types = append(types, []transport.DataType{transport.TypeUint64, transport.TypeFloat32, transport.TypeInt32, transport.TypeInt32}[j%4])
			}
			ran := make(chan struct{})
			go func() {
				defer close(ran)
				switch kind {
				case peerCtl:
					_, _, _ = ts.serveCtl(SimpleRequest{Sender: sender, Timestamp: int32(i), Head: head, Body: body})
				case peerSync, peerSSP:
					m := &transport.Message{Meta: transport.Meta{
						Sender: sender, AppID: 1, Timestamp: int32(i), Request: true,
						Push: flags&1 != 0, Pull: flags&2 != 0, Head: head, Filters: int32(flags >> 2),
						DataTypes: types,
					}, Data: frames}
					if kind == peerSync {
						syncSrv.serve(m)
					} else {
						m.Meta.AppID = 2
						sspSrv.serve(m)
					}
				case peerRejoin:
					// What serveRejoin passes on to a synchronous table.
					var rq rejoinRequest
					if json.Unmarshal(body, &rq) != nil {
						return
					}
					inc, ok := n.incarnation(sender)
					if !ok {
						return
					}
					_, _ = syncH.rejoin(sender, inc, syncRejoin{Probe: rq.Probe, Epoch: rq.Epoch, Step: rq.Steps["w"], From: rq.From}, syncSrv)
				case peerSnapshot:
					st, err := NewStoreHandler[float32](store.Sum[float32]{}, 1+int(flags%3))
					if err != nil {
						t.Error(err)
						return
					}
					m := &transport.Message{Meta: transport.Meta{Sender: sender, Body: body, DataTypes: types}, Data: frames}
					recent, err := installSnapshot(st, m)
					if err != nil {
						return
					}
					for w, l := range recent.by {
						if len(l) > recentPerWorker {
							t.Errorf("%d recent pushes kept of worker %d", len(l), w)
						}
					}
				}
			}()
			select {
			case <-ran:
			case <-time.After(10 * time.Second):
				t.Fatalf("request %d (kind %d, head %d, body %q) not handled within 10 s", i, kind, head, body)
			}
		}
		_ = syncH.Held()
		_ = sspH.Waiting()
		if got := n.Nodes(); len(got) != 5 {
			t.Errorf("node table of %d entries after peers' requests, want 5", len(got))
		}
	})
}
