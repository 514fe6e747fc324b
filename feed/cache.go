package feed

import (
	"unsafe"

	"github.com/spindle-ps/spindle/io/records"
	"github.com/spindle-ps/spindle/io/split"
)

// MaxCacheMiB bounds the cache a trainer's flag may ask for (1 TiB).
const MaxCacheMiB = 1 << 20

// exampleBytes is what a cached example costs besides its keys and
// values.
const exampleBytes = int64(unsafe.Sizeof(records.Example{}))

// cache keeps the parsed examples of the shards a worker read, within a
// budget of bytes (Options.CacheBytes), for the later epochs that hand
// it the same shards. A shard enters whole or not at all, first come
// first kept: on the cyclic order of epochs, evicting one shard for
// another would only trade which one is read again.
type cache struct {
	budget, used int64
	shards       map[split.Split][]records.Example
}

// get returns the examples of s, if they are kept.
func (c *cache) get(s split.Split) ([]records.Example, bool) {
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
	exs   []records.Example
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

// add copies examples into the shard's entry. The copies of one call
// share one backing array of keys and one of values.
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
		f.full, f.exs = true, nil
		return
	}
	keys, vals := make([]uint64, 0, n), make([]float32, 0, n)
	for _, ex := range exs {
		k0 := len(keys)
		keys, vals = append(keys, ex.Keys...), append(vals, ex.Vals...)
		f.exs = append(f.exs, records.Example{Label: ex.Label, Keys: keys[k0:len(keys):len(keys)], Vals: vals[k0:len(vals):len(vals)]})
	}
}

// keep enters the shard, read whole without a malformed record, into the
// cache.
func (f *filling) keep(s split.Split) {
	if f == nil || f.full {
		return
	}
	if f.c.shards == nil {
		f.c.shards = make(map[split.Split][]records.Example)
	}
	f.c.shards[s] = f.exs
	f.c.used += f.bytes
}
