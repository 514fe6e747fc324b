package feed

import (
	"unsafe"

	"github.com/spindle-ps/spindle/io/records"
	"github.com/spindle-ps/spindle/io/split"
)

// MaxCacheMiB bounds the cache a trainer's flag may ask for (1 TiB).
const MaxCacheMiB = 1 << 20

// exampleBytes is what a cached example costs besides its keys and
// values: its label, its weight (where a shard has weights) and where its
// keys end.
const exampleBytes = int64(2*unsafe.Sizeof(float32(0)) + unsafe.Sizeof(int(0)))

// cache keeps the parsed examples of the shards a worker read, within a
// budget of bytes (Options.CacheBytes), for the later epochs that hand
// it the same shards. A shard enters whole or not at all, first come
// first kept: on the cyclic order of epochs, evicting one shard for
// another would only trade which one is read again.
type cache struct {
	budget, used int64
	shards       map[split.Split]*cached
}

// cached is one shard's examples in flat arrays, which the garbage
// collector need not scan: example i has label labels[i], weight
// weights[i] (nil until an example of the shard has one) and the keys
// and values [ends[i-1], ends[i]).
type cached struct {
	labels  []float32
	weights []float32
	ends    []int
	keys    []uint64
	vals    []float32
}

// len is the number of examples.
func (c *cached) len() int { return len(c.labels) }

// examples fills out with the examples [from, from+len(out)), slices of
// c's arrays.
func (c *cached) examples(from int, out []records.Example) {
	start := 0
	if from > 0 {
		start = c.ends[from-1]
	}
	for i := range out {
		end := c.ends[from+i]
		out[i] = records.Example{Label: c.labels[from+i], Keys: c.keys[start:end:end], Vals: c.vals[start:end:end]}
		if c.weights != nil {
			out[i].Weight = c.weights[from+i]
		}
		start = end
	}
}

// get returns the examples of s, if they are kept.
func (c *cache) get(s split.Split) (*cached, bool) {
	if c == nil {
		return nil, false
	}
	ex, ok := c.shards[s]
	return ex, ok
}

// filling is one shard's examples being copied into the cache while it
// is read; it gives up once they would pass the budget.
type filling struct {
	c     *cache
	ex    cached
	bytes int64
	full  bool
}

// fill starts keeping s's examples, or returns nil when the cache has
// no room left or keeps s already.
func (c *cache) fill(s split.Split) *filling {
	if c == nil || c.used >= c.budget {
		return nil
	}
	if _, ok := c.shards[s]; ok {
		return nil
	}
	return &filling{c: c}
}

// add copies examples into the shard's entry.
func (f *filling) add(exs []records.Example) {
	if f == nil || f.full {
		return
	}
	n := 0
	for i := range exs {
		n += len(exs[i].Keys)
	}
	f.bytes += int64(len(exs))*exampleBytes + int64(n)*(8+4)
	if f.c.used+f.bytes > f.c.budget {
		f.full, f.ex = true, cached{}
		return
	}
	for _, ex := range exs {
		if ex.Weight != 0 && f.ex.weights == nil {
			f.ex.weights = make([]float32, len(f.ex.labels), cap(f.ex.labels))
		}
		if f.ex.weights != nil {
			f.ex.weights = append(f.ex.weights, ex.Weight)
		}
		f.ex.labels = append(f.ex.labels, ex.Label)
		f.ex.keys = append(f.ex.keys, ex.Keys...)
		f.ex.vals = append(f.ex.vals, ex.Vals...)
		f.ex.ends = append(f.ex.ends, len(f.ex.keys))
	}
}

// keep enters the shard, read whole without a malformed record, into the
// cache.
func (f *filling) keep(s split.Split) {
	if f == nil || f.full {
		return
	}
	if f.c.shards == nil {
		f.c.shards = make(map[split.Split]*cached)
	}
	// The arrays grew by doubling: keep them at their length.
	ex := &cached{
		labels: append([]float32(nil), f.ex.labels...), ends: append([]int(nil), f.ex.ends...),
		keys: append([]uint64(nil), f.ex.keys...), vals: append([]float32(nil), f.ex.vals...),
	}
	if f.ex.weights != nil {
		ex.weights = append([]float32(nil), f.ex.weights...)
	}
	f.c.shards[s] = ex
	f.c.used += f.bytes
}
