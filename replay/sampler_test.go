package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepfork/stepfork/trace"
)

// sampledTicket is the input of the sampled service's agent.
type sampledTicket struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

const sampledSecret = "sk-live-CANARY0123456789abcdefghij"

// sampledAgent looks the ticket up and scores it on two goroutines, asks a
// fake model (fresh ids every call), and fails tickets above 100.
func sampledAgent() Agent {
	lookup := Tool("lookup", func(_ context.Context, id string) (map[string]any, error) {
		return map[string]any{"id": id, "api_key": sampledSecret}, nil
	})
	score := Tool("score", func(_ context.Context, id string) (int, error) { return len(id), nil })
	model := func(context.Context, Request) (Response, error) {
		return Response{Content: "ok", Extra: map[string]any{"id": "chatcmpl-" + uuid.NewString()}}, nil
	}
	return Typed(func(ctx context.Context, in sampledTicket) (string, error) {
		var wg sync.WaitGroup
		var lerr, serr error
		wg.Go(func() { _, lerr = lookup(ctx, in.ID) })
		wg.Go(func() { _, serr = score(ctx, in.ID) })
		wg.Wait()
		if err := errors.Join(lerr, serr); err != nil {
			return "", err
		}
		if _, err := LLM(ctx, Request{Model: "fake", Messages: []Message{{Role: "user", Content: in.ID}}}, model); err != nil {
			return "", err
		}
		if in.Amount > 100 {
			return "", fmt.Errorf("ticket %s: %.0f is above the limit", in.ID, in.Amount)
		}
		return "done " + in.ID, nil
	})
}

// serve starts a service whose handler runs the agent through s, and sends
// it n concurrent requests (every 7th above the limit). It returns how many
// requests failed the way the agent fails them and checks every response.
func serve(t *testing.T, s *Sampler, n int) (failed int) {
	t.Helper()
	agent := sampledAgent()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in sampledTicket
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := s.Run(r.Context(), "triage", in, agent)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		fmt.Fprint(w, out)
	}))
	defer srv.Close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			in := sampledTicket{ID: fmt.Sprintf("t_%03d", i), Amount: 50}
			want, wantCode := "done "+in.ID, http.StatusOK
			if i%7 == 0 {
				in.Amount, want, wantCode = 500, "above the limit", http.StatusUnprocessableEntity
			}
			body, _ := json.Marshal(in)
			resp, err := srv.Client().Post(srv.URL, "application/json", bytes.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			var got bytes.Buffer
			got.ReadFrom(resp.Body)
			if resp.StatusCode != wantCode || !strings.Contains(got.String(), want) {
				errs <- fmt.Errorf("request %d: %d %q, want %d %q", i, resp.StatusCode, got.String(), wantCode, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range n {
		if i%7 == 0 {
			failed++
		}
	}
	return failed
}

func bundlesIn(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.sftrace"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSamplerUnderLoad runs 200 concurrent requests through a service that
// keeps every failed run and 10 % of the rest: exactly that many bundles are
// written, each valid with its integrity and payload hashes, none holding
// the secret the agent's tool returned.
func TestSamplerUnderLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &Sampler{Dir: dir, Keep: FailedPlus(0.1)}
	failed := serve(t, s, 200)
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := failed + (200-failed)/10
	st := s.Stats()
	if st.Runs != 200 || st.Kept != int64(want) || st.Saved != int64(want) || st.Dropped != 0 || st.Failed != 0 {
		t.Fatalf("stats %+v, want 200 runs and %d kept and saved", st, want)
	}
	paths := bundlesIn(t, dir)
	if len(paths) != want {
		t.Fatalf("%d bundles written, want %d", len(paths), want)
	}
	nFailed := 0
	for _, p := range paths {
		rep := trace.ValidateBundle(context.Background(), p, trace.CheckIntegrity())
		if !rep.Valid() {
			t.Errorf("%s is not valid: %v", p, rep.Issues)
		}
		tr, err := trace.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Status == trace.RunFailed {
			nFailed++
		}
		filepath.WalkDir(p, func(f string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, _ := os.ReadFile(f); bytes.Contains(b, []byte(sampledSecret)) {
					t.Errorf("%s holds the secret in clear", f)
				}
			}
			return nil
		})
	}
	if nFailed != failed {
		t.Errorf("%d failed runs saved, want every one of the %d", nFailed, failed)
	}
}

// TestSamplerFullDisk saves onto a disk that is full: no request fails or
// changes, each failed save is logged and counted, and Close says so.
func TestSamplerFullDisk(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	var mu sync.Mutex
	s := &Sampler{
		Dir:    t.TempDir(),
		Keep:   func(*Result) bool { return true },
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &log, mu: &mu}, nil)),
		saveRun: func(*trace.Trace, string) error {
			return &fs.PathError{Op: "write", Path: "events.jsonl", Err: syscall.ENOSPC}
		},
	}
	serve(t, s, 40)
	err := s.Close(t.Context())
	if err == nil || !strings.Contains(err.Error(), "40 of 40 kept run(s) were not saved") || !strings.Contains(err.Error(), "40 failed to save") {
		t.Fatalf("Close() = %v, want the 40 failed saves counted", err)
	}
	if st := s.Stats(); st.Failed != 40 || st.Saved != 0 {
		t.Errorf("stats %+v, want 40 failed saves", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(log.String(), "saving a sampled run failed"); n != 40 || !strings.Contains(log.String(), "no space left on device") {
		t.Errorf("logged %d failed saves, want 40 naming the cause:\n%s", n, log.String())
	}
}

// TestSamplerNeverWaitsForTheDisk blocks the disk: requests still finish
// at once, kept runs beyond the queue are dropped and counted, and Close
// gives up when its context ends.
func TestSamplerNeverWaitsForTheDisk(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := &Sampler{
		Dir:     t.TempDir(),
		Keep:    func(*Result) bool { return true },
		Queue:   2,
		Logger:  slog.New(slog.DiscardHandler),
		saveRun: func(*trace.Trace, string) error { <-release; return nil },
	}
	start := time.Now()
	serve(t, s, 30)
	elapsed := time.Since(start)
	st := s.Stats()
	// At most samplerSavers runs are being saved (the blocked disk holds
	// them) and two wait in the queue; every other kept run was dropped.
	if st.Kept != 30 || st.Dropped < 30-2-samplerSavers || st.Dropped > 28 || st.Kept != st.Saved+st.Dropped+st.Failed+st.Pending {
		t.Errorf("stats %+v, want 30 kept, %d to 28 dropped, the rest pending", st, 30-2-samplerSavers)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := s.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "still being saved") {
		t.Errorf("Close with the disk blocked = %v, want the context's deadline and the runs being saved", err)
	}
	// What waited in the queue was dropped when Close gave up; only the
	// runs being saved are pending.
	if st := s.Stats(); st.Pending > samplerSavers || st.Kept != st.Saved+st.Dropped+st.Failed+st.Pending {
		t.Errorf("stats %+v after Close gave up: the counts do not add up", st)
	}
	close(release)
	err = s.Close(t.Context())
	st = s.Stats()
	if st.Saved+st.Dropped != 30 || st.Pending != 0 {
		t.Errorf("stats %+v: saved and dropped do not add up to the 30 kept", st)
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d of 30 kept run(s) were not saved", st.Dropped)) {
		t.Errorf("Close after the disk came back = %v, want the %d dropped runs reported", err, st.Dropped)
	}
	// The requests did not wait for the blocked disk (which never answered
	// while they ran); how long they took is logged for the reader, not timed.
	t.Logf("30 requests with the disk blocked took %v", elapsed)
}

func TestFailedPlus(t *testing.T) {
	t.Parallel()
	ok := &Result{Trace: &trace.Trace{Manifest: trace.Manifest{Status: trace.RunCompleted}}}
	bad := &Result{Trace: &trace.Trace{Manifest: trace.Manifest{Status: trace.RunFailed}}}
	for _, tc := range []struct {
		fraction float64
		want     int
	}{{0, 0}, {0.01, 10}, {0.1, 100}, {0.25, 250}, {1, 1000}, {-1, 0}, {2, 1000}} {
		keep := FailedPlus(tc.fraction)
		n := 0
		for range 1000 {
			if keep(ok) {
				n++
			}
			if !keep(bad) {
				t.Fatalf("FailedPlus(%v) dropped a failed run", tc.fraction)
			}
		}
		if n != tc.want {
			t.Errorf("FailedPlus(%v) kept %d of 1000 completed runs, want %d", tc.fraction, n, tc.want)
		}
	}
}

func TestSamplerInsideSession(t *testing.T) {
	t.Parallel()
	s := &Sampler{Dir: t.TempDir(), Keep: func(*Result) bool { return true }}
	outer := Typed(func(ctx context.Context, in sampledTicket) (any, error) {
		return s.Run(ctx, "inner", in, sampledAgent())
	})
	res, err := Record(t.Context(), "outer", sampledTicket{ID: "t_1", Amount: 1}, outer)
	if err != nil || res.Output != "done t_1" {
		t.Fatalf("Record = %v, %v", res.Output, err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(bundlesIn(t, s.Dir)); n != 0 || s.Stats().Kept != 0 {
		t.Errorf("a sampler inside a recording saved %d runs; the outer session records them", n)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// BenchmarkSamplerRun is the cost of a sampled request (recorded in memory,
// kept or not) next to running the agent unrecorded, for the overhead the
// recording adds to a request. Both check the agent's output; sampled
// checks that every run was recorded (its three calls executed) and
// offered to Keep, and that none was kept.
func BenchmarkSamplerRun(b *testing.B) {
	agent := sampledAgent()
	in := sampledTicket{ID: "t_1", Amount: 1}
	b.Run("unrecorded", func(b *testing.B) {
		v, err := trace.ValueOf(in)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if out, err := agent(context.Background(), v); err != nil || out != "done t_1" {
				b.Fatalf("the agent returned %v, %v", out, err)
			}
		}
	})
	b.Run("sampled", func(b *testing.B) {
		var offered atomic.Int64
		s := &Sampler{Dir: b.TempDir(), Keep: func(res *Result) bool {
			if res.Executed == 3 && res.Output == "done t_1" {
				offered.Add(1)
			}
			return false
		}}
		for b.Loop() {
			if out, err := s.Run(context.Background(), "triage", in, agent); err != nil || out != "done t_1" {
				b.Fatalf("the sampled agent returned %v, %v", out, err)
			}
		}
		if err := s.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		if st := s.Stats(); offered.Load() != int64(b.N) || st.Runs != int64(b.N) || st.Kept != 0 {
			b.Fatalf("%d of %d runs recorded and offered to Keep, stats %+v", offered.Load(), b.N, st)
		}
	})
}
