package store_test

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/psnode/store"
)

// keySets are ways keys arrive at a table, each a list of pushes, with
// the layout a table that chooses it (AutoDense) should end with.
func keySets(rng *rand.Rand) []struct {
	name   string
	pushes [][]uint64
	layout string
} {
	const n = 3000
	within := func(lo uint64, span, m int) []uint64 {
		ks := make([]uint64, m)
		for i := range ks {
			ks[i] = lo + uint64(rng.IntN(span))
		}
		return ks
	}
	scattered := func(m int) []uint64 {
		ks := make([]uint64, m)
		for i := range ks {
			ks[i] = rng.Uint64()
		}
		return ks
	}
	// Keys 1..n in pushes of 100 that each reach a little further.
	var widening [][]uint64
	for lo := uint64(1); lo <= n; lo += 100 {
		widening = append(widening, within(lo, 100, 100))
	}
	return []struct {
		name   string
		pushes [][]uint64
		layout string
	}{
		{"crowded from 0", [][]uint64{append(within(0, n, 2000), 0), within(0, n, 500), {}, within(0, n, 2500)}, "dense"},
		{"crowded at the top", [][]uint64{within(math.MaxUint64-n+1, n, 2000), {math.MaxUint64}, within(math.MaxUint64-n+1, n, 2500)}, "dense"},
		{"widening", widening, "dense"},
		{"scattered", [][]uint64{scattered(2000), scattered(500), scattered(2500)}, "ordered"},
		{"sparse ids", [][]uint64{within(1, 8*n, 2000), within(1, 8*n, 500), within(1, 8*n, 2500)}, "ordered"},
		{"scattered, then a crowd inserted", [][]uint64{scattered(2000), within(1<<62, n, 2000)}, "hashed"},
		{"scattered, then a crowd pushed", [][]uint64{scattered(2000), scattered(500), within(1<<62, n, 2500)}, "hashed"},
		{"two far clusters", [][]uint64{within(1, n, 2000), within(1<<40, n, 2000)}, "hashed"},
		{"crowded, then one far key", [][]uint64{within(1, n, 2000), within(1, n, 500), {1 << 50}}, "hashed"},
		{"one far key, then crowded", [][]uint64{{1 << 50}, within(1<<50-n, n, 2000), within(1<<50-n, n, 2000)}, "dense"},
	}
}

// TestAutoDenseMatchesHashTable pushes the same keys, for every updater
// and two widths, into a table that chooses its layout and into a hash
// table, through Update (recording slots) and Insert, and requires the
// same keys, bit-identical values and state, the same Gather and Lookup
// answers, slots that read right whenever Update calls them valid, and
// the layout each way of arriving should end with.
func TestAutoDenseMatchesHashTable(t *testing.T) {
	t.Parallel()
	for _, name := range store.UpdaterNames() {
		for _, dim := range []int{1, 3} {
			rng := rand.New(rand.NewPCG(7, uint64(dim)))
			for _, set := range keySets(rng) {
				t.Run(fmt.Sprintf("%s/dim=%d/%s", name, dim, set.name), func(t *testing.T) {
					t.Parallel()
					upd, err := store.NewUpdater[float32](name, nil)
					if err != nil {
						t.Fatal(err)
					}
					auto, _ := store.NewTable[float32](dim, upd.StateWidth(), 0)
					ref, _ := store.NewTable[float32](dim, upd.StateWidth(), 0)
					if err := auto.AutoDense(store.MaxDenseKeys); err != nil {
						t.Fatal(err)
					}
					if set.name == "crowded from 0" {
						init := func(key uint64, vals, _ []float32) { vals[0] = float32(key % 7) }
						auto.SetInit(init)
						ref.SetInit(init)
					}
					rng := rand.New(rand.NewPCG(9, uint64(dim)))
					var probe []uint64
					for round, keys := range set.pushes {
						g := make([]float32, len(keys)*dim)
						for i := range g {
							g[i] = float32(rng.NormFloat64())
						}
						if round%2 == 1 {
							// Insert and apply key by key.
							for i, k := range keys {
								s, _ := auto.Insert(k)
								upd.Apply(auto.Vals(s), auto.State(s), g[i*dim:(i+1)*dim])
							}
						} else {
							slots := make([]uint32, len(keys))
							ok, err := auto.Update(keys, g, upd, slots)
							if err != nil {
								t.Fatalf("push %d: Update: %v", round, err)
							}
							if ok {
								checkSlots(t, auto, keys, slots)
							}
						}
						for i, k := range keys {
							s, _ := ref.Insert(k)
							upd.Apply(ref.Vals(s), ref.State(s), g[i*dim:(i+1)*dim])
						}
						pullPushBySlot(t, rng, auto, ref, upd, keys)
						probe = append(probe, keys...)
						compareTables(t, auto, ref, append(slices.Clone(probe), 5, 1<<45, math.MaxUint64-1))
					}
					if got := auto.Layout(); got != set.layout {
						t.Fatalf("layout %s, want %s", got, set.layout)
					}
					if auto.MemoryBytes() > ref.MemoryBytes() {
						t.Fatalf("%d bytes, a hash table of the same keys %d", auto.MemoryBytes(), ref.MemoryBytes())
					}
				})
			}
		}
	}
}

// pullPushBySlot pulls keys, all stored, from tab with GatherSlots and
// pushes new gradients to them by the pull's slots (UpdateAt), as a
// server's store handler does for a worker's mini-batch, and pushes the
// same gradients into ref key by key.
func pullPushBySlot(t *testing.T, rng *rand.Rand, tab, ref *store.Table[float32], upd store.Updater[float32], keys []uint64) {
	t.Helper()
	d := tab.Dim()
	out := make([]float32, len(keys)*d)
	slots := make([]uint32, len(keys))
	found, ok, err := tab.GatherSlots(keys, out, nil, slots)
	if err != nil || found != len(keys) || !ok {
		t.Fatalf("GatherSlots of %d stored keys: found %d, ok %v, %v", len(keys), found, ok, err)
	}
	checkSlots(t, tab, keys, slots)
	g := make([]float32, len(keys)*d)
	for i := range g {
		g[i] = float32(rng.NormFloat64())
	}
	if err := tab.UpdateAt(slots, g, upd); err != nil {
		t.Fatalf("UpdateAt: %v", err)
	}
	for i, k := range keys {
		s, _ := ref.Insert(k)
		upd.Apply(ref.Vals(s), ref.State(s), g[i*d:(i+1)*d])
	}
}

// checkSlots requires slots, which Update called valid, to read the
// values of keys.
func checkSlots(t *testing.T, tab *store.Table[float32], keys []uint64, slots []uint32) {
	t.Helper()
	d := tab.Dim()
	vals := make([]float32, len(keys)*d)
	if err := tab.ValsAt(slots, vals); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		s, _ := tab.Lookup(k)
		if !bitsEqual(vals[i*d:(i+1)*d], tab.Vals(s)) {
			t.Fatalf("ValsAt for key %d = %v, want %v", k, vals[i*d:(i+1)*d], tab.Vals(s))
		}
	}
}

// TestAutoDenseLargePush covers the pushes large enough to be applied on
// several goroutines: into an empty table, a push of crowded keys goes
// dense at once; into a table of a few far keys, it lands in a hash table
// that has to grow midway; into a table that places scattered keys by
// their order, the crowd stops the goroutines, and the table hashes its
// keys instead.
func TestAutoDenseLargePush(t *testing.T) {
	defer store.SetTestParts(3)()
	upd := store.Sum[float32]{}
	const n = 200_000
	crowded := make([]uint64, n)
	for i := range crowded {
		crowded[i] = 1000 + uint64(i)*3/2 // ascending, two keys in three
	}
	crowded = slices.Compact(crowded)
	rng := rand.New(rand.NewPCG(3, 4))
	scattered := make([]uint64, 100_000)
	for i := range scattered {
		scattered[i] = rng.Uint64() | 1<<63
	}
	slices.Sort(scattered)
	scattered = slices.Compact(scattered)
	for _, c := range []struct {
		first  []uint64
		layout string // after the first push
		end    string
	}{
		{nil, "", "dense"},
		{[]uint64{1 << 60, 1<<60 + 99}, "hashed", "hashed"},
		{scattered, "ordered", "hashed"},
	} {
		auto, _ := store.NewTable[float32](1, 0, 0)
		ref, _ := store.NewTable[float32](1, 0, 0)
		if err := auto.AutoDense(store.MaxDenseKeys); err != nil {
			t.Fatal(err)
		}
		for i, keys := range [][]uint64{c.first, crowded, crowded} {
			g := make([]float32, len(keys))
			for i := range g {
				g[i] = float32(i%13) - 6
			}
			slots := make([]uint32, len(keys))
			for _, tab := range []*store.Table[float32]{auto, ref} {
				ok, err := tab.Update(keys, g, upd, slots)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					checkSlots(t, tab, keys, slots)
				}
			}
			if i == 0 && c.layout != "" && auto.Layout() != c.layout {
				t.Errorf("first push of %d keys: layout %s, want %s", len(c.first), auto.Layout(), c.layout)
			}
		}
		// The pull of a large request, on the goroutines, records slots.
		pullPushBySlot(t, rng, auto, ref, upd, crowded)
		probe := append(crowded[:1000:1000], 1, 1<<60)
		if len(c.first) > 0 {
			probe = append(probe, c.first[:2]...)
		}
		compareTables(t, auto, ref, probe)
		if got := auto.Layout(); got != c.end {
			t.Errorf("first push of %d keys: layout %s, want %s", len(c.first), got, c.end)
		}
	}
}

// TestAutoDenseWideningIsAmortised: keys that arrive one at a time, each
// beyond the others (ids handed out in order, or in reverse), lay the
// table out anew only as often as a hash table doubles, not once per key.
func TestAutoDenseWideningIsAmortised(t *testing.T) {
	t.Parallel()
	const n = 100_000
	for _, down := range []bool{false, true} {
		tab, _ := store.NewTable[float32](1, 0, 0)
		if err := tab.AutoDense(store.MaxDenseKeys); err != nil {
			t.Fatal(err)
		}
		gen := tab.Generation()
		one := []float32{1}
		for i := range uint64(n) {
			k := 1 + i
			if down {
				k = 1<<40 - i
			}
			if i%2 == 0 {
				s, _ := tab.Insert(k)
				tab.Vals(s)[0]++
			} else if _, err := tab.Update([]uint64{k}, one, store.Sum[float32]{}, nil); err != nil {
				t.Fatal(err)
			}
		}
		// A hash table doubles about log2(n) times; each doubling may
		// re-center the range once more.
		if moves, most := tab.Generation()-gen, uint64(2*bits.Len(n)+4); moves > most {
			t.Errorf("down=%v: laid out %d times for %d keys, want at most %d", down, moves, n, most)
		}
		if !tab.Dense() || tab.Len() != n {
			t.Errorf("down=%v: dense = %v, %d keys; want dense, %d", down, tab.Dense(), tab.Len(), n)
		}
	}
}

// TestAutoDenseSwitch: AutoDense on a hash table of crowded keys lays it
// out densely at the next Update, without losing a value or a state; AutoDense(0)
// leaves such a table hashed; a limit below the keys' range keeps it
// hashed too.
func TestAutoDenseSwitch(t *testing.T) {
	t.Parallel()
	fill := func(limit int) *store.Table[float64] {
		tab, _ := store.NewTable[float64](2, 1, 0)
		for k := uint64(1); k <= 1000; k++ {
			s, _ := tab.Insert(k)
			tab.Vals(s)[1], tab.State(s)[0] = float64(k), -float64(k)
		}
		if err := tab.AutoDense(limit); err != nil {
			t.Fatal(err)
		}
		if _, err := tab.Update([]uint64{5}, []float64{1, 1}, store.DefaultAdaGrad[float64](), nil); err != nil {
			t.Fatal(err)
		}
		return tab
	}
	for _, c := range []struct {
		limit int
		dense bool
	}{{store.MaxDenseKeys, true}, {0, false}, {1000, false}} {
		tab := fill(c.limit)
		if tab.Dense() != c.dense {
			t.Errorf("limit %d: dense = %v, want %v", c.limit, tab.Dense(), c.dense)
		}
		for k := uint64(1); k <= 1000; k++ {
			s, ok := tab.Lookup(k)
			if k == 5 {
				continue // updated
			}
			if !ok || tab.Vals(s)[1] != float64(k) || tab.State(s)[0] != -float64(k) {
				t.Fatalf("limit %d: key %d: %v, %v, %v", c.limit, k, ok, tab.Vals(s), tab.State(s))
			}
		}
	}
}

func TestAutoDenseInvalid(t *testing.T) {
	t.Parallel()
	tab, _ := store.NewTable[float32](1, 0, 0)
	for _, n := range []int{-1, store.MaxDenseKeys + 1} {
		if err := tab.AutoDense(n); !errors.Is(err, store.ErrInvalidConfig) {
			t.Errorf("AutoDense(%d) = %v, want ErrInvalidConfig", n, err)
		}
	}
}

// FuzzAutoDense drives a table that chooses its layout, with the limit
// the input picks, through Updates, Inserts and Gathers of keys near 0,
// near 2^40, near the top of the key space or anywhere, and requires the
// sums a map keeps.
func FuzzAutoDense(f *testing.F) {
	f.Add([]byte{3, 0, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 1, 200, 2})
	f.Add([]byte{2, 0, 8, 130, 131, 132, 133, 134, 135, 136, 137, 1, 255, 0, 4, 70, 71, 72, 73, 2})
	f.Add([]byte{1, 1, 0, 192, 1, 193, 0, 3, 64, 65, 66})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		limits := []int{0, 64, 4096, store.MaxDenseKeys}
		tab, _ := store.NewTable[float64](1, 0, 0)
		if err := tab.AutoDense(limits[int(data[0])%len(limits)]); err != nil {
			t.Fatal(err)
		}
		data = data[1:]
		want := map[uint64]float64{}
		// key maps a byte to a key: its low 6 bits are an offset from the
		// base its top 2 bits pick.
		key := func(b byte) uint64 {
			off := uint64(b & 63)
			switch b >> 6 {
			case 0:
				return off
			case 1:
				return 1<<40 + off*3
			case 2:
				return math.MaxUint64 - off
			}
			return (uint64(b) * 0x9e3779b97f4a7c15) | 1<<63>>(b&7)
		}
		next := func() (byte, bool) {
			if len(data) == 0 {
				return 0, false
			}
			b := data[0]
			data = data[1:]
			return b, true
		}
		for {
			op, ok := next()
			if !ok {
				break
			}
			switch op % 3 {
			case 0: // Update with up to 63 keys
				n, _ := next()
				var keys []uint64
				for range n % 64 {
					b, ok := next()
					if !ok {
						break
					}
					keys = append(keys, key(b))
				}
				g := make([]float64, len(keys))
				for i, k := range keys {
					g[i] = float64(i + 1)
					want[k] += g[i]
				}
				slots := make([]uint32, len(keys))
				valid, err := tab.Update(keys, g, store.Sum[float64]{}, slots)
				if err != nil {
					t.Fatal(err)
				}
				if valid {
					vals := make([]float64, len(keys))
					if err := tab.ValsAt(slots, vals); err != nil {
						t.Fatal(err)
					}
					for i, k := range keys {
						if vals[i] != want[k] {
							t.Fatalf("ValsAt: key %d = %v, want %v", k, vals[i], want[k])
						}
					}
				}
			case 1: // Insert one key
				b, ok := next()
				if !ok {
					break
				}
				k := key(b)
				s, _ := tab.Insert(k)
				tab.Vals(s)[0] += 0.5
				want[k] += 0.5
			case 2: // Gather every key seen and one never pushed
				keys := append(slices.Collect(func(yield func(uint64) bool) {
					for k := range want {
						if !yield(k) {
							return
						}
					}
				}), 1<<39)
				out := make([]float64, len(keys))
				if _, err := tab.Gather(keys, out, nil); err != nil {
					t.Fatal(err)
				}
				for i, k := range keys {
					if out[i] != want[k] {
						t.Fatalf("Gather: key %d = %v, want %v", k, out[i], want[k])
					}
				}
			}
			if tab.Len() != len(want) {
				t.Fatalf("%d keys, want %d", tab.Len(), len(want))
			}
		}
		tab.Range(func(k uint64, vals, _ []float64) bool {
			if vals[0] != want[k] {
				t.Fatalf("key %d = %v, want %v", k, vals[0], want[k])
			}
			return true
		})
	})
}
