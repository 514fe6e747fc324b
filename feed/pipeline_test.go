package feed

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/spindle-ps/spindle/io/records"
)

// TestPipelineOrder runs batches through pipelines of depth 0, 1 and 2:
// each batch is started when it comes and finished Depth batches later,
// in order, with the examples it was given even though the caller reuses
// its buffers; at most MaxPushes pushes are in flight; Flush finishes
// every batch and waits for every push.
func TestPipelineOrder(t *testing.T) {
	const batches, maxPushes = 7, 3
	for depth := 0; depth <= 2; depth++ {
		t.Run(fmt.Sprint("depth", depth), func(t *testing.T) {
			var events []string
			inFlight, most := 0, 0
			p := &Pipeline[int]{
				Depth: depth, MaxPushes: maxPushes,
				Start: func(_ context.Context, s *Slot[int]) error {
					s.Model = s.Batch.Step
					events = append(events, fmt.Sprint("start ", s.Batch.Step))
					return nil
				},
				Finish: func(_ context.Context, s *Slot[int]) ([]Pending, error) {
					if s.Model != s.Batch.Step {
						t.Errorf("slot of batch %d holds the model state of batch %d", s.Batch.Step, s.Model)
					}
					if got := s.Batch.Examples[0].Keys[0]; got != uint64(s.Batch.Step) {
						t.Errorf("batch %d finished with key %d: its examples changed under it", s.Batch.Step, got)
					}
					events = append(events, fmt.Sprint("finish ", s.Batch.Step))
					inFlight++
					most = max(most, inFlight)
					step := s.Batch.Step
					return []Pending{func(context.Context) error {
						inFlight--
						events = append(events, fmt.Sprint("pushed ", step))
						return nil
					}}, nil
				},
			}
			ctx := context.Background()
			// One buffer, overwritten for every batch as the feed does.
			ex := []records.Example{{Keys: []uint64{0}, Vals: []float32{1}}}
			for b := 0; b < batches; b++ {
				ex[0].Keys[0] = uint64(b)
				if err := p.Step(ctx, Batch{Step: b, Examples: ex}); err != nil {
					t.Fatal(err)
				}
				ex[0].Keys[0] = 999
			}
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			index := func(e string) int { return slices.Index(events, e) }
			for b := 0; b < batches; b++ {
				start, finish, pushed := index(fmt.Sprint("start ", b)), index(fmt.Sprint("finish ", b)), index(fmt.Sprint("pushed ", b))
				if start < 0 || finish < start || pushed < finish {
					t.Fatalf("batch %d: start at %d, finish at %d, pushed at %d: %v", b, start, finish, pushed, events)
				}
				if b+depth < batches {
					if next := index(fmt.Sprint("start ", b+depth)); next > finish {
						t.Errorf("batch %d finished before batch %d started: %v", b, b+depth, events)
					}
				}
				if b > 0 && finish < index(fmt.Sprint("finish ", b-1)) {
					t.Errorf("batch %d finished before batch %d", b, b-1)
				}
				if depth == 0 && b+1 < batches && pushed > index(fmt.Sprint("start ", b+1)) {
					t.Errorf("depth 0: batch %d's push was not waited for before batch %d: %v", b, b+1, events)
				}
			}
			if inFlight != 0 {
				t.Errorf("%d pushes in flight after Flush", inFlight)
			}
			if want := min(maxPushes+1, batches); depth > 0 && most != want {
				t.Errorf("at most %d pushes in flight, want %d (MaxPushes, plus the one just sent)", most, want)
			}
		})
	}
}
