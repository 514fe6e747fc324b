package web

import (
	"maps"
	"slices"
	"time"
)

// maxSamples bounds the samples of the workers' records kept: once full,
// every other sample is dropped and samples are taken half as often, so
// that a long job keeps its whole history at a coarser grain.
const maxSamples = 1200

// rateWindow is the span over which a worker's speed is averaged: shards
// end in bursts, so a rate between two samples a second apart would jump
// between zero and a peak.
const rateWindow = 5 * time.Second

// history is the workers' records read over time. It is not safe for
// concurrent use.
type history struct {
	max   int
	every int // keep one add in every
	adds  int
	times []time.Time
	// records[rank][i] is worker rank's records at times[i]; -1 before
	// the worker first appeared.
	records map[int][]int64
}

// add records the workers' counts at now.
func (h *history) add(now time.Time, recs map[int]int64) {
	h.adds++
	if h.every > 1 && h.adds%h.every != 0 {
		return
	}
	if h.records == nil {
		h.records = map[int][]int64{}
	}
	if len(h.times) >= h.max {
		h.thin()
	}
	n := len(h.times)
	h.times = append(h.times, now)
	for r, v := range recs {
		row, ok := h.records[r]
		if !ok {
			row = make([]int64, n, n+1)
			for i := range row {
				row[i] = -1
			}
		}
		h.records[r] = append(row, v)
	}
	for r, row := range h.records {
		if len(row) < n+1 { // a worker the state forgot (not expected)
			h.records[r] = append(row, row[len(row)-1])
		}
	}
}

// thin drops every other sample and halves the sampling rate.
func (h *history) thin() {
	keep := func(n int) []int {
		var idx []int
		for i := 0; i < n; i += 2 {
			idx = append(idx, i)
		}
		return idx
	}
	idx := keep(len(h.times))
	times := make([]time.Time, len(idx))
	for j, i := range idx {
		times[j] = h.times[i]
	}
	h.times = times
	for r, row := range h.records {
		nr := make([]int64, len(idx))
		for j, i := range idx {
			nr[j] = row[i]
		}
		h.records[r] = nr
	}
	h.every *= 2
}

// speed returns the workers' examples per second at every sample, and
// their totals from now.
func (h *history) speed(now map[int]int64) Speed {
	sp := Speed{Times: make([]float64, len(h.times)), Workers: []WorkerRate{}}
	for i, t := range h.times {
		sp.Times[i] = float64(t.UnixMilli()) / 1000
	}
	ranks := slices.Sorted(maps.Keys(h.records))
	for r := range now {
		if _, ok := h.records[r]; !ok {
			ranks = append(ranks, r)
		}
	}
	slices.Sort(ranks)
	for _, r := range ranks {
		row := h.records[r]
		wr := WorkerRate{Rank: r, Records: now[r], Rates: make([]*float64, len(h.times))}
		for i := range row {
			if row[i] < 0 {
				continue
			}
			// The newest earlier sample at least rateWindow before, or
			// the first one the worker has.
			j := i
			for j > 0 && row[j-1] >= 0 && h.times[i].Sub(h.times[j]) < rateWindow {
				j--
			}
			v := 0.0
			if dt := h.times[i].Sub(h.times[j]).Seconds(); dt > 0 && row[i] >= row[j] {
				v = float64(row[i]-row[j]) / dt
			}
			wr.Rates[i] = &v
		}
		sp.Workers = append(sp.Workers, wr)
	}
	return sp
}
