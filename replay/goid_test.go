package replay

import (
	"runtime"
	"sync"
	"testing"
)

// TestGoidMatchesStack checks the fast goroutine id against the one
// runtime.Stack prints, on many live goroutines at once, and that the fast
// path is taken where it exists.
func TestGoidMatchesStack(t *testing.T) {
	t.Parallel()
	if got, want := goid(), stackGoid(); got != want || got == 0 {
		t.Fatalf("goid() = %d, runtime.Stack says %d", got, want)
	}
	if (runtime.GOOS == "linux" && runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") && goidOffset < 0 {
		t.Fatalf("no goroutine id offset found on %s: every session pays for runtime.Stack", runtime.GOARCH)
	}
	const n = 64
	var wg sync.WaitGroup
	hold := make(chan struct{})
	ids := make([]uint64, n)
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fast, slow := goid(), stackGoid()
			if fast != slow {
				errs <- "mismatch"
			}
			ids[i] = fast
			<-hold
		}()
	}
	close(hold)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	seen := map[uint64]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("goroutine id %d seen twice among live goroutines", id)
		}
		seen[id] = true
	}
}

// BenchmarkGoid is the cost of the goroutine id a session looks up on
// every call. It checks each id against the one runtime.Stack prints for
// the benchmark's goroutine, read once beforehand.
func BenchmarkGoid(b *testing.B) {
	want := stackGoid()
	for b.Loop() {
		if id := goid(); id != want {
			b.Fatalf("goid() = %d, runtime.Stack says %d", id, want)
		}
	}
}
