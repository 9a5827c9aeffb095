package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stepfork/stepfork/trace"
)

// Sampler records a sample of the runs of an agent in a running service and
// saves each kept run as a bundle into Dir, to collect the runs worth keeping
// (every failure, a share of ordinary traffic) as a regression corpus.
//
// Every run is recorded in memory as [Record] records it (redacted as it is
// recorded, with the scrubbers of Scrub too); Keep decides after the run
// whether it is saved. Recording never fails and never delays the request
// it records beyond the recording's own work: the agent's output and error
// are returned as if nothing recorded them, and kept runs are written by a
// few background goroutines, so a slow or full disk costs the request
// nothing. Whatever goes wrong while saving (a failed save, a full queue)
// is logged to Logger and counted in [Sampler.Stats]; the run goes on.
// [Sampler.Close] reports every kept run that was not saved.
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
	// dropped (and counted as Dropped); 0 is 1024, which a healthy disk
	// never fills: 2,000 requests from 50 goroutines keeping 457 runs in
	// half a second drop none, where fsync takes milliseconds.
	Queue int
	// Scrub holds scrubbers that every recorded run passes through, as
	// [Scrubbers] installs them on a session: nothing they remove reaches
	// a bundle or the log.
	Scrub Scrubbers

	once    sync.Once
	queue   chan *trace.Trace
	done    chan struct{} // closed once every saver has ended
	giveUp  chan struct{} // closed when Close gives up waiting
	mu      sync.RWMutex  // guards closed against sends in flight
	closed  bool
	stats   samplerStats
	saveRun func(tr *trace.Trace, path string) error // (*trace.Trace).Save; a seam for tests
}

// samplerSavers is how many kept runs a Sampler saves at once: a disk
// whose fsync takes milliseconds saves several runs in that time.
const samplerSavers = 4

// SamplerStats counts what a [Sampler] did. Every kept run is in exactly
// one of Saved, Dropped, Failed and Pending, so Kept is their sum whenever
// Stats is called.
type SamplerStats struct {
	Runs       int64 // runs that went through Run
	Unrecorded int64 // runs refused before the agent ran (no agent name, nil agent, input not JSON)
	Kept       int64 // runs Keep kept
	Saved      int64 // kept runs saved as bundles
	Dropped    int64 // kept runs dropped: the queue was full, the sampler was closed, or Close gave up waiting
	Failed     int64 // kept runs whose save failed
	Pending    int64 // kept runs waiting to be saved or being saved
}

// samplerStats are the counts and, up to maxLost, the run ids of the kept
// runs that were not saved, under one lock so that a snapshot adds up.
type samplerStats struct {
	mu sync.Mutex
	SamplerStats
	lost     []string // run ids of kept runs not saved (dropped or failed)
	lostMore int      // and how many more
}

// maxLost bounds the run ids of runs not saved that Close names.
const maxLost = 20

// move moves one kept run from one count to another (to nil: from
// Pending to nowhere else), noting the id of a run lost.
func (st *samplerStats) move(from, to *int64, runID string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if from != nil {
		*from--
	}
	*to++
	if to == &st.Dropped || to == &st.Failed {
		if len(st.lost) < maxLost {
			st.lost = append(st.lost, runID)
		} else {
			st.lostMore++
		}
	}
}

func (st *samplerStats) add(to *int64) {
	st.mu.Lock()
	*to++
	st.mu.Unlock()
}

// Stats returns the counts so far.
func (s *Sampler) Stats() SamplerStats {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return s.stats.SamplerStats
}

// FailedPlus keeps every failed run and the given fraction (0 to 1) of the
// others: exactly ⌊n·fraction⌋ of the first n completed runs, spread evenly
// (every tenth for 0.1), so a sample's size is known in advance. With the
// default queue of a [Sampler], a healthy disk saves every run kept.
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
	s.stats.add(&s.stats.Runs)
	if fromContext(ctx) != nil {
		v, err := valueOf(input)
		if err != nil {
			return nil, fmt.Errorf("replay.Sampler: the run input cannot be passed to the agent: %w", err)
		}
		return agent(ctx, v)
	}
	res, err := Record(ctx, agentName, input, agent, s.Scrub)
	if res == nil {
		// Nothing ran: the agent name is empty, the agent nil, or the input
		// cannot be encoded as JSON (so no Agent could receive it either).
		s.stats.add(&s.stats.Unrecorded)
		return nil, err
	}
	if res.Trace != nil {
		keep := s.Keep
		if keep == nil {
			keep = func(r *Result) bool { return r.Trace.Status == trace.RunFailed }
		}
		if keep(res) {
			s.stats.add(&s.stats.Kept)
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
		s.stats.move(nil, &s.stats.Dropped, tr.RunID)
		s.logger().WarnContext(ctx, "stepfork: run not saved: the sampler is closed", "run_id", tr.RunID)
		return
	}
	s.stats.add(&s.stats.Pending)
	select {
	case s.queue <- tr:
	default:
		s.stats.move(&s.stats.Pending, &s.stats.Dropped, tr.RunID)
		s.logger().WarnContext(ctx, "stepfork: run not saved: the save queue is full", "run_id", tr.RunID, "queue", cap(s.queue))
	}
}

func (s *Sampler) start() {
	n := s.Queue
	if n <= 0 {
		n = 1024
	}
	s.queue = make(chan *trace.Trace, n)
	s.done = make(chan struct{})
	s.giveUp = make(chan struct{})
	save := s.saveRun
	if save == nil {
		save = func(tr *trace.Trace, path string) error { return tr.Save(path) }
	}
	var wg sync.WaitGroup
	for range samplerSavers {
		wg.Go(func() {
			for tr := range s.queue {
				select {
				case <-s.giveUp:
					s.stats.move(&s.stats.Pending, &s.stats.Dropped, tr.RunID)
					continue
				default:
				}
				path := filepath.Join(s.Dir, filepath.Base(DefaultPath(tr.AgentName, tr.RunID)))
				err := os.MkdirAll(s.Dir, 0o755)
				if err == nil {
					err = save(tr, path)
				}
				if err != nil {
					s.stats.move(&s.stats.Pending, &s.stats.Failed, tr.RunID)
					s.logger().Error("stepfork: saving a sampled run failed", "run_id", tr.RunID, "path", path, "error", err)
					continue
				}
				s.stats.move(&s.stats.Pending, &s.stats.Saved, tr.RunID)
			}
		})
	}
	go func() {
		wg.Wait()
		close(s.done)
	}()
}

// Close stops accepting runs to save (later kept runs are dropped and
// counted) and waits until the pending ones are saved, or until ctx is
// done: then the runs still waiting in the queue are dropped (and
// counted), and those being saved are left to finish. It returns an error
// when a kept run was not saved — dropped, failed, or still being saved
// when Close gave up — that counts each kind and names their run ids,
// and matches ctx's error if Close gave up waiting.
func (s *Sampler) Close(ctx context.Context) error {
	s.once.Do(s.start)
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.queue)
	}
	s.mu.Unlock()
	var gaveUp error
	select {
	case <-s.done:
	case <-ctx.Done():
		gaveUp = ctx.Err()
		s.mu.Lock()
		select {
		case <-s.giveUp:
		default:
			close(s.giveUp)
		}
		s.mu.Unlock()
		for tr := range s.queue { // what the savers have not taken
			s.stats.move(&s.stats.Pending, &s.stats.Dropped, tr.RunID)
		}
	}
	return s.notSaved(gaveUp)
}

// notSaved is the error of Close: nil when every kept run was saved.
func (s *Sampler) notSaved(gaveUp error) error {
	s.stats.mu.Lock()
	st, lost, more := s.stats.SamplerStats, slices.Clone(s.stats.lost), s.stats.lostMore
	s.stats.mu.Unlock()
	if st.Dropped == 0 && st.Failed == 0 && st.Pending == 0 && gaveUp == nil {
		return nil
	}
	var parts []string
	if st.Dropped > 0 {
		parts = append(parts, fmt.Sprintf("%d dropped (the save queue of %d was full, or the sampler closed)", st.Dropped, cap(s.queue)))
	}
	if st.Failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed to save (see the log)", st.Failed))
	}
	if st.Pending > 0 {
		parts = append(parts, fmt.Sprintf("%d still being saved", st.Pending))
	}
	msg := fmt.Sprintf("replay.Sampler: %d of %d kept run(s) were not saved into %s: %s", st.Dropped+st.Failed+st.Pending, st.Kept, s.Dir, strings.Join(parts, ", "))
	if len(lost) > 0 {
		msg += "; not saved: " + strings.Join(lost, ", ")
		if more > 0 {
			msg += fmt.Sprintf(" and %d more", more)
		}
	}
	if gaveUp != nil {
		return fmt.Errorf("%s; Close gave up waiting: %w", msg, gaveUp)
	}
	return errors.New(msg)
}
