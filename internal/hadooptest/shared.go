package hadooptest

import (
	"sync"
	"testing"
)

// Shared is a result that one test computes for all the tests of its
// package that need it, such as a job whose model several tests compare
// against. Keep one Shared per job, not one for a group of jobs: the
// cluster stages of scripts/test.sh run only their tests (-run Hadoop),
// which then run only the jobs they read.
type Shared[T any] struct {
	once sync.Once
	v    T
	ok   bool
}

// Get returns the result, which run computes for the first caller. When
// run failed (it calls t.Fatal), every caller fails, naming what.
func (s *Shared[T]) Get(t testing.TB, what string, run func() T) T {
	t.Helper()
	s.once.Do(func() { s.v, s.ok = run(), true })
	if !s.ok {
		t.Fatalf("the shared %s failed (see the first test's output)", what)
	}
	return s.v
}
