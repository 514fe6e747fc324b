package awake

import (
	"runtime"
	"testing"
	"time"
)

// waitFor waits, at most ten seconds, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", what)
		}
		runtime.Gosched()
	}
}

// TestTouchBeforeStartDoesNothing: a process that never started the
// spinners pays one atomic load per Touch.
func TestTouchBeforeStartDoesNothing(t *testing.T) {
	Touch()
	if Spins() != 0 {
		t.Fatal("Spins moved without spinners")
	}
}

// TestSpinsWhileTouchedAndSleepsAfter checks the spinners' two states: a
// Touch wakes them (their loop goes round), and once no Touch came for
// the window they sleep (their loop stands still) until the next.
func TestSpinsWhileTouchedAndSleepsAfter(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("spinners run on Linux only")
	}
	if n := Start(1); n != 1 {
		t.Fatalf("Start(1) = %d spinners, want 1", n)
	}
	if n := Start(4); n != 1 {
		t.Errorf("a second Start = %d spinners, want the first's 1", n)
	}
	for round := range 3 {
		waitFor(t, "the spinner still spins with nothing touched", sleeping)
		before := Spins()
		Touch()
		waitFor(t, "the spinner's loop did not go round after Touch", func() bool { return Spins() > before })
		waitFor(t, "the spinner did not sleep after the window", sleeping)
		t.Logf("round %d: %d rounds of 64 spins", round, Spins()-before)
	}
}
