package store

// SetTestParts makes a large Update or Gather use n goroutines whatever
// the processors, until the returned function is called.
func SetTestParts(n int) (restore func()) {
	testParts = n
	return func() { testParts = 0 }
}
