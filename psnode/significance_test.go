package psnode_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/psnode"
)

// TestSignificanceFilter: on an asynchronous and on a bounded-delay table
// with threshold 1, a push sends a key's value once it adds up to 1 with
// what was held back, holds back the rest, and Tables.Idle sends what is
// held: the servers end with the sum of every value pushed.
func TestSignificanceFilter(t *testing.T) {
	for _, bounded := range []bool{false, true} {
		c := startCluster(t, 2, 1, 49, nil)
		ctx := ctxT(t, 20*time.Second)
		var wt *psnode.Table[float32]
		var wts *psnode.Tables
		for _, n := range c.all() {
			ts, err := psnode.NewTables(n, psnode.TablesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tab, err := psnode.NewTable(ts, psnode.TableSpec[float32]{
				Name: "w", Partitioner: "range", MaxKey: 1000, Significance: 1, BoundedDelay: bounded,
			})
			if err != nil {
				t.Fatal(err)
			}
			if n == c.workers[0] {
				wt, wts = tab, ts
			}
		}
		step := 0
		push := func(keys []uint64, vals ...float32) {
			t.Helper()
			var ts int32
			var err error
			if bounded {
				ts, err = wt.PushAt(ctx, psnode.Clock{Step: step}, keys, vals)
				step++
			} else {
				ts, err = wt.Push(ctx, keys, vals)
			}
			if err == nil {
				err = wt.Wait(ctx, ts)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		expect := func(what string, want ...float32) {
			t.Helper()
			var got []float32
			ts, err := wt.Pull(ctx, []uint64{1, 999}, &got)
			if err == nil {
				err = wt.Wait(ctx, ts)
			}
			if err != nil || len(got) != 2 || math.Abs(float64(got[0]-want[0])) > 1e-6 || got[1] != want[1] {
				t.Fatalf("bounded %v, %s: servers hold %v (%v), want %v", bounded, what, got, err, want)
			}
		}
		push([]uint64{1, 999}, 0.4, 2)
		expect("after 0.4 and 2", 0, 2)
		push([]uint64{1}, 0.4)
		push([]uint64{1}, 0.4)
		expect("after 1.2 added up", 1.2, 2)
		push([]uint64{1}, 0.3)
		if got := wt.Withheld(); got != 3 {
			t.Errorf("bounded %v: %d values held back, want 3", bounded, got)
		}
		if err := wts.Idle(ctx, 0); err != nil {
			t.Fatal(err)
		}
		expect("after Idle", 1.5, 2)
		c.close()
	}
}

// TestKKTFilter: with threshold 1, the values pushed for a key whose
// weight the worker last pulled as zero wait until they add up to 1; a
// key with a non-zero weight, or one never pulled, goes out at once.
func TestKKTFilter(t *testing.T) {
	c := startCluster(t, 2, 1, 51, nil)
	ctx := ctxT(t, 20*time.Second)
	var wt *psnode.Table[float32]
	for _, n := range c.all() {
		ts, err := psnode.NewTables(n, psnode.TablesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tab, err := psnode.NewTable(ts, psnode.TableSpec[float32]{Name: "w", Partitioner: "range", MaxKey: 1000, KKT: 1})
		if err != nil {
			t.Fatal(err)
		}
		if n == c.workers[0] {
			wt = tab
		}
	}
	keys := []uint64{1, 999}
	do := func(ts int32, err error) {
		t.Helper()
		if err == nil {
			err = wt.Wait(ctx, ts)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var got []float32
	pull := func(want ...float32) {
		t.Helper()
		do(wt.Pull(ctx, keys, &got))
		for i := range want {
			if math.Abs(float64(got[i]-want[i])) > 1e-6 {
				t.Fatalf("servers hold %v, want %v", got, want)
			}
		}
	}
	do(wt.Push(ctx, []uint64{500}, []float32{0.1})) // never pulled: sent
	pull(0, 0)                                      // both weights zero
	do(wt.Push(ctx, keys, []float32{0.4, 2}))
	pull(0, 2) // 0.4 held; 999 is non-zero now
	do(wt.Push(ctx, []uint64{999}, []float32{0.1}))
	do(wt.Push(ctx, []uint64{1}, []float32{0.7}))
	pull(1.1, 2.1) // 0.4+0.7 reached 1
	do(wt.Push(ctx, []uint64{1}, []float32{0.2}))
	pull(1.3, 2.1) // key 1's weight is non-zero: sent at once
	if n := wt.Withheld(); n != 1 {
		t.Errorf("%d values held back, want 1", n)
	}
	var one []float32
	do(wt.Pull(ctx, []uint64{500}, &one))
	if len(one) != 1 || math.Abs(float64(one[0]-0.1)) > 1e-6 {
		t.Errorf("key 500 holds %v, want 0.1", one)
	}
}

func TestSignificanceFilterSpec(t *testing.T) {
	c := startCluster(t, 1, 1, 50, nil)
	ts, err := psnode.NewTables(c.workers[0], psnode.TablesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		spec psnode.TableSpec[float32]
		want string
	}{
		{psnode.TableSpec[float32]{Name: "a", Significance: 1, Sync: true}, "not a synchronous one"},
		{psnode.TableSpec[float32]{Name: "b", Significance: math.NaN()}, "significance threshold NaN"},
		{psnode.TableSpec[float32]{Name: "c", Significance: -1}, "significance threshold -1"},
		{psnode.TableSpec[float32]{Name: "d", KKT: 1, Sync: true}, "the KKT filter needs an asynchronous"},
		{psnode.TableSpec[float32]{Name: "e", KKT: math.Inf(1)}, "KKT threshold +Inf"},
	} {
		if _, err := psnode.NewTable(ts, tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.spec.Name, err, tt.want)
		}
	}
}
