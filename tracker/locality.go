package tracker

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spindle-ps/spindle/io/dfs"
)

// BlockLocator returns where the blocks of a file are stored
// (dfs.Locator.Blocks).
type BlockLocator func(ctx context.Context, uri string) ([]dfs.BlockLocation, error)

// Bounds of WithLocations.
const (
	// maxLocatedFiles bounds the files whose blocks are looked up.
	maxLocatedFiles = 10_000
	// locateBudget bounds the time spent looking them up.
	locateBudget = 30 * time.Second
)

// WithLocations returns a Planner that plans with p, then gives each
// shard of an hdfs:// file the hosts storing most of its bytes
// (Shard.Hosts), so that the tracker can hand workers the shards stored
// on their hosts. Locations are a hint: the first file whose blocks
// cannot be found, more than 10,000 files or more than 30 s of lookups
// leave the remaining shards without hosts, and never fail the plan.
func WithLocations(p Planner, locate BlockLocator) Planner {
	return func(ctx context.Context, inputs []string, splitSize int64) ([]Shard, error) {
		shards, err := p(ctx, inputs, splitSize)
		if err != nil || locate == nil {
			return shards, err
		}
		lctx, cancel := context.WithTimeout(ctx, locateBudget)
		defer cancel()
		blocks := map[string][]dfs.BlockLocation{}
		for i := range shards {
			sh := &shards[i]
			if !strings.HasPrefix(sh.URI, "hdfs://") {
				continue
			}
			bl, ok := blocks[sh.URI]
			if !ok {
				if len(blocks) >= maxLocatedFiles || lctx.Err() != nil {
					break
				}
				var err error
				if bl, err = locate(lctx, sh.URI); err != nil {
					break
				}
				blocks[sh.URI] = bl
			}
			sh.Hosts, sh.Racks = shardHosts(bl, sh.Start, sh.Length)
		}
		return shards, nil
	}
}

// shardHosts returns the hosts that store the most bytes of [start,
// start+length) among blocks, and the racks of every block in the range.
func shardHosts(blocks []dfs.BlockLocation, start, length int64) (hosts, racks []string) {
	end := start + length
	bytes := map[string]int64{}
	var order []string
	for _, b := range blocks {
		lo, hi := max(start, b.Offset), min(end, b.Offset+b.Length)
		if hi <= lo {
			continue
		}
		for _, r := range b.Racks {
			if !slices.Contains(racks, r) {
				racks = append(racks, r)
			}
		}
		for _, h := range b.Hosts {
			if _, seen := bytes[h]; !seen {
				order = append(order, h)
			}
			bytes[h] += hi - lo
		}
	}
	var most int64
	for _, n := range bytes {
		most = max(most, n)
	}
	for _, h := range order {
		if bytes[h] == most {
			hosts = append(hosts, h)
		}
	}
	return hosts, racks
}
