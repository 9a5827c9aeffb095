package replay

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stepfork/stepfork/trace"
)

// TestSamplerDefaultQueue runs 2,000 requests from 50 goroutines through
// a Sampler with its default queue that keeps every failed run and a tenth
// of the others (457 runs): on a healthy disk none is dropped, every kept
// run is saved, and the counts add up.
func TestSamplerDefaultQueue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &Sampler{Dir: dir, Keep: FailedPlus(0.1)}
	agent := sampledAgent()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Go(func() {
			for i := range 40 {
				n := g*40 + i
				in := sampledTicket{ID: fmt.Sprintf("t_%04d", n), Amount: 50}
				if n%7 == 0 {
					in.Amount = 500
				}
				s.Run(context.Background(), "triage", in, agent)
			}
		})
	}
	wg.Wait()
	ran := time.Since(start)
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	st := s.Stats()
	t.Logf("2,000 requests in %v, all saved %v later: %+v", ran, time.Since(start)-ran, st)
	if st.Runs != 2000 || st.Kept != 457 || st.Saved != 457 || st.Dropped != 0 || st.Failed != 0 {
		t.Errorf("stats %+v, want 2,000 runs, 457 kept and saved, none dropped", st)
	}
	if n := len(bundlesIn(t, dir)); n != 457 {
		t.Errorf("%d bundles in the directory, want 457", n)
	}
}

// TestSamplerFailingDiskUnderLoad saves onto a disk that fails every third
// save while 50 goroutines send 2,000 requests: every kept run is saved or
// counted as failed, none lost, the bundles in the directory are exactly
// the saved ones, and Close reports the failures.
func TestSamplerFailingDiskUnderLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var mu sync.Mutex
	n := 0
	s := &Sampler{Dir: dir, Keep: FailedPlus(0.1), Logger: slog.New(slog.DiscardHandler),
		saveRun: func(tr *trace.Trace, path string) error {
			mu.Lock()
			n++
			fail := n%3 == 0
			mu.Unlock()
			if fail {
				return &fs.PathError{Op: "write", Path: path, Err: syscall.EIO}
			}
			return tr.Save(path)
		}}
	agent := sampledAgent()
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Go(func() {
			for i := range 40 {
				k := g*40 + i
				in := sampledTicket{ID: fmt.Sprintf("t_%04d", k), Amount: 50}
				if k%7 == 0 {
					in.Amount = 500
				}
				s.Run(context.Background(), "triage", in, agent)
			}
		})
	}
	wg.Wait()
	err := s.Close(context.Background())
	st := s.Stats()
	if st.Kept != 457 || st.Saved+st.Failed != 457 || st.Dropped != 0 || st.Pending != 0 || st.Failed != 457/3 {
		t.Errorf("stats %+v, want 457 kept, %d failed, the others saved", st, 457/3)
	}
	if got := len(bundlesIn(t, dir)); got != int(st.Saved) {
		t.Errorf("%d bundles in the directory, %d saved", got, st.Saved)
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d of 457 kept run(s) were not saved", st.Failed)) {
		t.Errorf("Close = %v, want the %d failed saves reported", err, st.Failed)
	}
}
