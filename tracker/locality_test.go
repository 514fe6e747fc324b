package tracker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/io/dfs"
)

func TestShardHosts(t *testing.T) {
	t.Parallel()
	blocks := []dfs.BlockLocation{
		{Offset: 0, Length: 100, Hosts: []string{"a", "10.0.0.1", "b"}, Racks: []string{"/r1"}},
		{Offset: 100, Length: 100, Hosts: []string{"b", "c"}, Racks: []string{"/r1", "/r2"}},
	}
	tests := []struct {
		start, length int64
		want, racks   []string
	}{
		{0, 100, []string{"a", "10.0.0.1", "b"}, []string{"/r1"}},
		{50, 100, []string{"b"}, []string{"/r1", "/r2"}}, // b holds 100 bytes, a and c 50
		{150, 50, []string{"b", "c"}, []string{"/r1", "/r2"}},
		{300, 10, nil, nil},
	}
	for _, tt := range tests {
		got, racks := shardHosts(blocks, tt.start, tt.length)
		if !slices.Equal(got, tt.want) || !slices.Equal(racks, tt.racks) {
			t.Errorf("shardHosts(%d+%d) = %v %v, want %v %v", tt.start, tt.length, got, racks, tt.want, tt.racks)
		}
	}
}

func TestWithLocations(t *testing.T) {
	t.Parallel()
	plan := func(context.Context, []string, int64) ([]Shard, error) {
		return []Shard{{URI: "hdfs://nn/a", Length: 100}, {URI: "file:///b", Length: 100}, {URI: "hdfs://nn/c", Length: 100}}, nil
	}
	calls := 0
	locate := func(_ context.Context, uri string) ([]dfs.BlockLocation, error) {
		calls++
		if uri == "hdfs://nn/c" {
			return nil, errors.New("no webhdfs")
		}
		return []dfs.BlockLocation{{Length: 100, Hosts: []string{"h1"}}}, nil
	}
	shards, err := WithLocations(plan, locate)(t.Context(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shards[0].Hosts, []string{"h1"}) || shards[1].Hosts != nil || shards[2].Hosts != nil || calls != 2 {
		t.Errorf("hosts %v %v %v after %d lookups", shards[0].Hosts, shards[1].Hosts, shards[2].Hosts, calls)
	}
}

// TestNextShardPrefersLocalShards: two workers on two hosts, the input
// half on each: every shard goes to the worker on its host (random
// placement would make half of them remote), and the share says so.
func TestNextShardPrefersLocalShards(t *testing.T) {
	t.Parallel()
	var shards []Shard
	for i := 0; i < 8; i++ {
		host := []string{"hostA", "hostB"}[i%2]
		shards = append(shards, Shard{URI: "hdfs://nn/f", Start: int64(i) * 10, Length: 10, Hosts: []string{host, host + "-ip"}})
	}
	s := NewState(shards, time.Now())
	s.SetWorkerHost(0, "hostB-ip")
	s.SetWorkerHost(1, "hostA")
	for n := 0; n < 4; n++ {
		for w, want := range map[int]string{0: "hostB", 1: "hostA"} {
			sh, d, err := s.NextShard(0, w, 0)
			if err != nil || d != Given {
				t.Fatalf("NextShard: %v %v", d, err)
			}
			if sh.Hosts[0] != want {
				t.Errorf("worker %d on %s got a shard of %v", w, want, sh.Hosts)
			}
		}
	}
	st := s.Status()
	if share, ok := st.NodeLocalShare(); !ok || share != 1 || st.LocatedGiven != 8 {
		t.Errorf("node-local share %v (%v), %d of %d", share, ok, st.LocalGiven, st.LocatedGiven)
	}
	// When its host holds nothing left, a worker reads a remote shard.
	s2 := NewState([]Shard{{URI: "hdfs://nn/f", Length: 10, Hosts: []string{"hostA"}}}, time.Now())
	s2.SetWorkerHost(0, "hostC")
	if _, d, _ := s2.NextShard(0, 0, 0); d != Given {
		t.Fatalf("remote shard not given: %v", d)
	}
	if share, ok := s2.Status().NodeLocalShare(); !ok || share != 0 {
		t.Errorf("remote read counted as node-local: %v %v", share, ok)
	}
	// Without hosts there is no share.
	if _, ok := NewState(nil, time.Now()).Status().NodeLocalShare(); ok {
		t.Errorf("a share without located shards")
	}
}

// TestNextShardGivesAWorkerItsShardsAgain: in the epoch after one in which
// worker 0 read shards 0 and 1 and worker 1 read 2, 3 and 4, each asks
// for shards in turn and gets its own back first (where its data cache
// has them), before its host's, then the others' once its own are out; a
// worker that read nothing before gets the queue's first.
func TestNextShardGivesAWorkerItsShardsAgain(t *testing.T) {
	t.Parallel()
	var shards []Shard
	for i := range 6 {
		shards = append(shards, Shard{URI: "hdfs://nn/f", Start: int64(i) * 10, Length: 10, Hosts: []string{"hostA"}})
	}
	s := NewState(shards, time.Now())
	s.SetWorkerHost(1, "hostA") // every shard is local to worker 1
	read := map[int64]int{0: 0, 1: 0, 2: 1, 3: 1, 4: 1, 5: 1}
	for n := range 6 {
		w := read[int64(n)]
		sh, d, err := s.NextShard(0, w, 0)
		if err != nil || d != Given || sh.ID != int64(n) {
			t.Fatalf("epoch 0: worker %d got shard %d (%v %v), want %d", w, sh.ID, d, err, n)
		}
		if err := s.ShardDone(0, sh.ID, w, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, w := range []int{1, 0, 1, 0, 2, 0} {
		sh, d, err := s.NextShard(1, w, 0)
		if err != nil || d != Given {
			t.Fatalf("epoch 1: worker %d: %v %v", w, d, err)
		}
		got = append(got, fmt.Sprintf("%d:%d", w, sh.ID))
	}
	// (A pick trades places with the queue's head: shard 0 moves behind
	// shard 1 when worker 1 takes shard 2.)
	if want := "1:2 0:1 1:3 0:0 2:4 0:5"; strings.Join(got, " ") != want {
		t.Errorf("epoch 1 handed out %s, want %s", strings.Join(got, " "), want)
	}
}
