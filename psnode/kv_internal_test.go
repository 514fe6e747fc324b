package psnode

import (
	"bytes"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/psnode/partition"
	"github.com/spindle-ps/spindle/psnode/transport"
)

// kvSender is the worker whose requests the fuzz targets decode.
const kvSender = 9

// kvMessage is a request or answer of kv as the worker or the server
// sends it: the keys, values and lens frames, compressed (zstd or only
// stored) when filters says so; keys, when not nil, is the keys frame's
// contents already written (key caching).
func kvMessage(tb testing.TB, kv KVPairs[float32], push bool, filters int32, keys []byte) *transport.Message {
	tb.Helper()
	m := &transport.Message{Meta: transport.Meta{Push: push, Pull: !push, Sender: kvSender}}
	m.Data = [][]byte{asBytes(slices.Clone(kv.Keys))}
	m.Meta.DataTypes = []transport.DataType{transport.TypeUint64}
	if kv.Vals != nil || kv.Lens != nil {
		m.Data = append(m.Data, asBytes(slices.Clone(kv.Vals)))
		m.Meta.DataTypes = append(m.Meta.DataTypes, transport.TypeFloat32)
	}
	if kv.Lens != nil {
		m.Data = append(m.Data, asBytes(slices.Clone(kv.Lens)))
		m.Meta.DataTypes = append(m.Meta.DataTypes, transport.TypeInt32)
	}
	if filters&filterCompress != 0 {
		if err := compressFrames(m, keys, filters&filterStored == 0); err != nil {
			tb.Fatal(err)
		}
		m.Meta.Filters |= filters & filterKeyCache
	}
	return m
}

// kvFuzzList is the key list the server's cache keeps before each fuzzed
// request, which a reference may name.
var kvFuzzList = []uint64{3, 5, 8, 13, 21, 34, 55, 89, 144}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func frameBytes(data [][]byte) (n int) {
	for _, d := range data {
		n += len(d)
	}
	return n
}

// FuzzKVRequest: a server reads any request's frames, compressed or not,
// with a key list written out, to keep, or referred to, without
// panicking; allocating a bounded multiple of what the frames hold and
// decode to; into keys, values and lens that agree. A request read encodes
// back to one that reads the same.
func FuzzKVRequest(f *testing.F) {
	kv := KVPairs[float32]{Keys: []uint64{1, 5, 1 << 33, 1<<33 + 1}, Vals: []float32{1, 2, 3, 4, 5, 6, 7, 8}}
	varLen := KVPairs[float32]{Keys: []uint64{2, 4, 6}, Vals: []float32{1, 2, 3}, Lens: []int32{0, 1, 2}}
	pull := KVPairs[float32]{Keys: []uint64{7, 3, 9}}
	worker := newKeyCaches(DefaultKeyCacheBytes)
	stored, _ := worker.encode(1, kvFuzzList)
	ref, _ := worker.encode(1, kvFuzzList)
	for _, m := range []*transport.Message{
		kvMessage(f, kv, true, 0, nil),
		kvMessage(f, varLen, true, 0, nil),
		kvMessage(f, pull, false, 0, nil),
		kvMessage(f, kv, true, filterCompress, nil),
		kvMessage(f, varLen, true, filterCompress|filterStored, nil),
		kvMessage(f, pull, false, filterCompress, nil),
		kvMessage(f, KVPairs[float32]{Keys: kvFuzzList, Vals: make([]float32, len(kvFuzzList))}, true, filterCompress|filterKeyCache, stored),
		kvMessage(f, KVPairs[float32]{Keys: kvFuzzList}, false, filterCompress|filterKeyCache|filterStored, ref),
	} {
		data := append(m.Data, nil, nil, nil)
		f.Add(m.Meta.Filters, m.Meta.Push, uint8(len(m.Data)), data[0], data[1], data[2])
	}
	f.Fuzz(func(t *testing.T, filters int32, push bool, frames uint8, k, v, l []byte) {
		m := &transport.Message{Meta: transport.Meta{Push: push, Pull: !push, Sender: kvSender, Filters: filters},
			Data: [][]byte{k, v, l, nil}[:frames%5]}
		in := frameBytes(m.Data)
		keys := newKeyCaches(DefaultKeyCacheBytes)
		keys.resolve(kvSender, keysFrame{keys: kvFuzzList, store: true})
		var got KVPairs[float32]
		var miss bool
		var err error
		n := allocated(func() { miss, err = readRequest(keys, m, &got) })
		if limit := 1<<20 + 64*uint64(in) + 4*uint64(frameBytes(m.Data)); n > limit {
			t.Fatalf("frames of %d bytes, decoded to %d, made the server allocate %d bytes", in, frameBytes(m.Data), n)
		}
		if miss || err != nil {
			return
		}
		if err := got.check(push); err != nil {
			t.Fatalf("a request read into %d keys, %d values and %d lens: %v", len(got.Keys), len(got.Vals), len(got.Lens), err)
		}
		// Back the way the worker sends it, written out: it reads the same.
		for _, filters := range []int32{0, filterCompress, filterCompress | filterStored} {
			if got.Keys == nil && (got.Vals != nil || got.Lens != nil) {
				break // no keys frame to put them after
			}
			again := kvMessage(t, got, push, filters, nil)
			var back KVPairs[float32]
			if _, err := readRequest(newKeyCaches(DefaultKeyCacheBytes), again, &back); err != nil {
				t.Fatalf("filters %#x: read back: %v", filters, err)
			}
			if !sameKV(back, got) {
				t.Fatalf("filters %#x: %+v read back as %+v", filters, got, back)
			}
		}
	})
}

// sameKV reports whether a and b hold the same keys, values (bit for
// bit) and lens, nil and empty alike.
func sameKV(a, b KVPairs[float32]) bool {
	return slices.Equal(a.Keys, b.Keys) && bytes.Equal(asBytes(a.Vals), asBytes(b.Vals)) && slices.Equal(a.Lens, b.Lens)
}

// FuzzKVReply: a worker reads any server's answer to a pull, compressed
// or not, without panicking, and puts it with another server's answer in
// the order of the keys asked: values and lens that agree, each part's
// where its keys are.
func FuzzKVReply(f *testing.F) {
	fixed := KVPairs[float32]{Vals: []float32{1, 2, 3, 4, 5, 6}}
	varLen := KVPairs[float32]{Vals: []float32{1, 2, 3}, Lens: []int32{0, 1, 2}}
	for _, filters := range []int32{0, filterCompress, filterCompress | filterStored} {
		for _, r := range []KVPairs[float32]{fixed, varLen} {
			m := kvMessage(f, r, false, filters, nil)
			data := append(m.Data, nil)
			f.Add(uint8(3), true, m.Meta.Filters, uint8(len(m.Data)), data[0], data[1], data[2])
		}
	}
	f.Fuzz(func(t *testing.T, nkeys uint8, first bool, filters int32, frames uint8, k, v, l []byte) {
		m := &transport.Message{Meta: transport.Meta{Filters: filters}, Data: [][]byte{k, v, l, nil}[:frames%5]}
		// The keys asked: the fuzzed answer's part (nkeys%8 keys) and the
		// other server's (two keys with two values each), first or
		// second.
		mine := int(nkeys % 8)
		segs := []partition.Segment{{Lo: 0, Hi: mine}, {Lo: mine, Hi: mine + 2}}
		other := reply[float32]{vals: []float32{-1, -2, -3, -4}}
		if !first {
			segs = []partition.Segment{{Lo: 0, Hi: 2}, {Lo: 2, Hi: 2 + mine}}
		}
		if _, err := decompressFrames(m); err != nil {
			return
		}
		r, err := decodeReply[float32](m, mine)
		if err != nil {
			return
		}
		replies := []reply[float32]{r, other}
		if !first {
			replies = []reply[float32]{other, r}
		}
		var vals []float32
		var lens []int32
		if err := assemble(mine+2, segs, replies, &vals, &lens); err != nil {
			t.Fatalf("answer of %d values and %d lens for %d keys: %v", len(r.vals), len(r.lens), mine, err)
		}
		if len(lens) != mine+2 {
			t.Fatalf("%d lens for %d keys", len(lens), mine+2)
		}
		off := make([]int, len(lens)+1)
		for i, n := range lens {
			if n < 0 {
				t.Fatalf("len %d of key %d", n, i)
			}
			off[i+1] = off[i] + int(n)
		}
		if off[len(lens)] != len(vals) {
			t.Fatalf("lens add up to %d, %d values", off[len(lens)], len(vals))
		}
		o := 0
		if first {
			o = mine
		}
		if got := vals[off[o]:off[o+2]]; !reflect.DeepEqual(got, other.vals) {
			t.Fatalf("the other server's values are %v, want %v", got, other.vals)
		}
	})
}
