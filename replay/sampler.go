package replay

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/stepfork/stepfork/trace"
)

// Sampler records a sample of the runs of an agent in a running service and
// saves each kept run as a bundle into Dir, to collect the runs worth keeping
// (every failure, a share of ordinary traffic) as a regression corpus.
//
// Every run is recorded in memory as [Record] records it (redacted as it is
// recorded); Keep decides after the run whether it is saved. Recording never
// fails and never delays the request it records beyond the recording's own
// work: the agent's output and error are returned as if nothing recorded
// them, and kept runs are
// written by one background goroutine, so a slow or full disk costs the
// request nothing. Whatever goes wrong while saving (a failed save, a full
// queue) is logged to Logger and counted in [Sampler.Stats]; the run
// goes on.
//
// Concurrent requests each get their own recording. The zero Sampler is not
// usable: Dir must be set. Close it to wait for the pending saves.
//
//	s := &replay.Sampler{Dir: "/var/lib/triage/runs", Keep: replay.FailedPlus(0.01)}
//	defer s.Close(context.Background())
//	out, err := s.Run(r.Context(), "triage", ticket, agent)
type Sampler struct {
	// Dir is the directory bundles are saved into, as AGENT-RUNID.sftrace. It
	// is created when the first run is saved.
	Dir string
	// Keep reports whether a finished run is saved. nil keeps the failed runs
	// only (see [FailedPlus]).
	Keep func(res *Result) bool
	// Logger receives what went wrong while recording; nil is slog.Default().
	Logger *slog.Logger
	// Queue is how many kept runs may wait to be saved before more are
	// dropped (and counted as Dropped); 0 is 64.
	Queue int

	once    sync.Once
	queue   chan *trace.Trace
	done    chan struct{}
	mu      sync.RWMutex // guards closed against sends in flight
	closed  bool
	stats   samplerStats
	saveRun func(tr *trace.Trace, path string) error // (*trace.Trace).Save; a seam for tests
}

// SamplerStats counts what a [Sampler] did.
type SamplerStats struct {
	Runs       int64 // runs that went through Run
	Unrecorded int64 // runs refused before the agent ran (no agent name, nil agent, input not JSON)
	Kept       int64 // runs Keep kept
	Saved      int64 // kept runs saved as bundles
	Dropped    int64 // kept runs dropped because the queue was full or the sampler closed
	Failed     int64 // kept runs whose save failed
}

type samplerStats struct {
	runs, unrecorded, kept, saved, dropped, failed atomic.Int64
}

// Stats returns the counts so far.
func (s *Sampler) Stats() SamplerStats {
	return SamplerStats{
		Runs: s.stats.runs.Load(), Unrecorded: s.stats.unrecorded.Load(), Kept: s.stats.kept.Load(),
		Saved: s.stats.saved.Load(), Dropped: s.stats.dropped.Load(), Failed: s.stats.failed.Load(),
	}
}

// FailedPlus keeps every failed run and the given fraction (0 to 1) of the
// others: exactly ⌊n·fraction⌋ of the first n completed runs, spread evenly
// (every tenth for 0.1), so a sample's size is known in advance.
func FailedPlus(fraction float64) func(res *Result) bool {
	fraction = max(0, min(1, fraction))
	var n atomic.Int64
	return func(res *Result) bool {
		if res.Trace != nil && res.Trace.Status == trace.RunFailed {
			return true
		}
		k := n.Add(1)
		return math.Floor(float64(k)*fraction) != math.Floor(float64(k-1)*fraction)
	}
}

func (s *Sampler) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// Run runs agent on input as [Record] does, returns what the agent returned,
// and saves the run when Keep keeps it. Inside another recording or replay
// session, Run only runs the agent (the outer session records it).
func (s *Sampler) Run(ctx context.Context, agentName string, input any, agent Agent) (any, error) {
	s.stats.runs.Add(1)
	if fromContext(ctx) != nil {
		v, err := valueOf(input)
		if err != nil {
			return nil, fmt.Errorf("replay.Sampler: the run input cannot be passed to the agent: %w", err)
		}
		return agent(ctx, v)
	}
	res, err := Record(ctx, agentName, input, agent)
	if res == nil {
		// Nothing ran: the agent name is empty, the agent nil, or the input
		// cannot be encoded as JSON (so no Agent could receive it either).
		s.stats.unrecorded.Add(1)
		return nil, err
	}
	if res.Trace != nil {
		keep := s.Keep
		if keep == nil {
			keep = func(r *Result) bool { return r.Trace.Status == trace.RunFailed }
		}
		if keep(res) {
			s.stats.kept.Add(1)
			s.enqueue(ctx, res.Trace)
		}
	}
	return res.Output, res.Err
}

func (s *Sampler) enqueue(ctx context.Context, tr *trace.Trace) {
	s.once.Do(s.start)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.stats.dropped.Add(1)
		s.logger().WarnContext(ctx, "stepfork: run not saved: the sampler is closed", "run_id", tr.RunID)
		return
	}
	select {
	case s.queue <- tr:
	default:
		s.stats.dropped.Add(1)
		s.logger().WarnContext(ctx, "stepfork: run not saved: the save queue is full", "run_id", tr.RunID, "queue", cap(s.queue))
	}
}

func (s *Sampler) start() {
	n := s.Queue
	if n <= 0 {
		n = 64
	}
	s.queue = make(chan *trace.Trace, n)
	s.done = make(chan struct{})
	save := s.saveRun
	if save == nil {
		save = func(tr *trace.Trace, path string) error { return tr.Save(path) }
	}
	go func() {
		defer close(s.done)
		for tr := range s.queue {
			path := filepath.Join(s.Dir, filepath.Base(DefaultPath(tr.AgentName, tr.RunID)))
			err := os.MkdirAll(s.Dir, 0o755)
			if err == nil {
				err = save(tr, path)
			}
			if err != nil {
				s.stats.failed.Add(1)
				s.logger().Error("stepfork: saving a sampled run failed", "run_id", tr.RunID, "path", path, "error", err)
				continue
			}
			s.stats.saved.Add(1)
		}
	}()
}

// Close stops accepting runs to save (later kept runs are dropped and
// counted) and waits until the pending ones are saved, or until ctx is done.
// It returns ctx's error if it gave up waiting, and an error counting the
// saves that failed, if any.
func (s *Sampler) Close(ctx context.Context) error {
	s.once.Do(s.start)
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.queue)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
		return fmt.Errorf("replay.Sampler: closing: %w", ctx.Err())
	}
	if n := s.stats.failed.Load(); n > 0 {
		return fmt.Errorf("replay.Sampler: %d sampled run(s) could not be saved into %s (see the log)", n, s.Dir)
	}
	return nil
}
