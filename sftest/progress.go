package sftest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// progressEvery is how often long work inside a test (a sweep's variants,
// a corpus's bundles, heals) logs how far it got: never before it has run
// that long, then at most once per period, so that go test -v shows a
// long sweep alive without a line per variant.
var progressEvery = 5 * time.Second

// progressLog writes a progress line (t.Logf; tests read it here).
var progressLog = func(t testing.TB, line string) { t.Helper(); t.Log(line) }

// progress counts finished units of long work and logs, through t.Logf,
// "sftest.Corpus: 12 bundle(s) of 50 done (15s)" at most once per period.
// It is safe for concurrent use.
type progress struct {
	t          testing.TB
	log        func(testing.TB, string)
	what, unit string // "sftest.Corpus", "bundle(s) of 50"
	total      int    // the last unit is not logged; 0: unknown
	every      time.Duration
	now        func() time.Time

	mu         sync.Mutex
	done       int
	start, due time.Time
}

func newProgress(t testing.TB, what, unit string, total int) *progress {
	p := &progress{t: t, log: progressLog, what: what, unit: unit, total: total, every: progressEvery, now: time.Now}
	p.start = p.now()
	p.due = p.start.Add(p.every)
	return p
}

// step counts one unit done and logs when the period is over; the last
// unit is not logged (the summary that follows says it all).
func (p *progress) step() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	now := p.now()
	if p.total > 0 && p.done >= p.total || now.Before(p.due) {
		return
	}
	p.due = now.Add(p.every)
	p.log(p.t, fmt.Sprintf("%s: %d %s done (%s)", p.what, p.done, p.unit, now.Sub(p.start).Round(time.Second)))
}

// forkLogger is a fork.Logger whose "variant finished" events step p.
func (p *progress) forkLogger() *slog.Logger { return slog.New(progressHandler{p}) }

type progressHandler struct{ p *progress }

func (h progressHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h progressHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "variant finished" {
		h.p.step()
	}
	return nil
}

func (h progressHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h progressHandler) WithGroup(string) slog.Handler      { return h }
