package explore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

// Config is what a session explores, and where it may write.
type Config struct {
	// Base is the run explored; Agent is the test's agent, which runs the
	// tail of every fork.
	Base  *trace.Trace
	Agent replay.Agent
	// Test is the name of the test that started the session (t.Name()).
	Test string
	// Dir is the test's package directory: "Save bundle" writes under its
	// testdata directory. "" disables saving.
	Dir string
	// Site is where the test handed sftest the base and the agent, for the
	// code of each run; nil when it is not known (the code then names them
	// base and agent).
	Site *Site
}

// session is one exploration of a base run: the forks run so far, and the
// one running, if any. Its fields after mu are guarded by mu.
type session struct {
	cfg         Config
	token       string
	points      []fork.PointInfo
	failureStep int // -1 when fork.Failure() does not resolve
	byID        map[string]int

	ctx   context.Context // canceled when the session ends
	stop  context.CancelFunc
	ended chan struct{} // closed when the person ends the session
	once  sync.Once
	wg    sync.WaitGroup // the fork running

	mu      sync.Mutex
	runs    []*run
	running *run
	cancel  context.CancelFunc // the running fork's
}

// run is one fork of the session.
type run struct {
	ID          int
	Step        int
	Point       string   // the fork point as fork resolved it
	AtCode      string   // the fork point in Go
	Changes     []string // as the page described them
	ChangeCodes []string // the changes and options in Go
	Policy      policySpec
	Started     time.Time
	Took        time.Duration
	// State is running, done (the fork ran: see V), error (it could not
	// run: see Err) or canceled.
	State string
	V     *fork.Variant
	Err   error
	Saved string // where the bundle was saved
	Wrote string // the test file written for it
}

func newSession(ctx context.Context, cfg Config) (*session, error) {
	if cfg.Base == nil || cfg.Agent == nil {
		return nil, errors.New("explore: the base run and the agent are both required")
	}
	tok, err := newToken()
	if err != nil {
		return nil, err
	}
	s := &session{cfg: cfg, token: tok, points: fork.Points(cfg.Base), failureStep: -1, ended: make(chan struct{}),
		byID: make(map[string]int, len(cfg.Base.Events))}
	s.ctx, s.stop = context.WithCancel(ctx)
	for i := range cfg.Base.Events {
		s.byID[cfg.Base.Events[i].ID] = i
	}
	if cfg.Base.Status == trace.RunFailed {
		if step, err := resolve(cfg.Base, fork.Failure()); err == nil {
			s.failureStep = step
		}
	}
	return s, nil
}

// end ends the session: the running fork is canceled, and Serve returns.
func (s *session) end() {
	s.once.Do(func() { close(s.ended) })
}

// runRequest is a fork the page asks for.
type runRequest struct {
	Step    int          `json:"step"`
	Changes []changeSpec `json:"changes"`
	Policy  policySpec   `json:"policy"`
}

// errBusy is the refusal of a fork while another runs.
var errBusy = errors.New("a fork is running: wait for it, or cancel it")

// start checks a fork request and runs it in the background: one at a
// time per session. A request that cannot run (an unknown point, a change
// that does not resolve, two changes that conflict) is refused before
// anything runs, with fork's own message.
func (s *session) start(req runRequest) (*run, error) {
	p, ok := s.pointAt(req.Step)
	if !ok {
		return nil, fmt.Errorf("step %d is not a fork point of the base run; the list of points says which are", req.Step)
	}
	at, atCode := s.atOf(p)
	r := &run{Step: p.Step, AtCode: atCode, Policy: req.Policy}
	var opts []fork.RunOption
	var changes []fork.Change
	for _, cs := range req.Changes {
		b, err := cs.build()
		if err != nil {
			return nil, err
		}
		changes = append(changes, b.change)
		opts = append(opts, b.change)
		r.Changes = append(r.Changes, b.change.Describe())
		r.ChangeCodes = append(r.ChangeCodes, b.code)
	}
	popts, pcode, err := req.Policy.build()
	if err != nil {
		return nil, err
	}
	opts = append(opts, popts...)
	r.ChangeCodes = append(r.ChangeCodes, pcode...)
	est, err := fork.Estimate(s.cfg.Base, at, []fork.Named{{Name: "run", Changes: changes}})
	if err != nil {
		return nil, err
	}
	r.Point = est.At.String()
	r.Changes = est.Variants[0].Changes

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running != nil {
		return nil, errBusy
	}
	if s.ctx.Err() != nil {
		return nil, errors.New("the session has ended")
	}
	r.ID, r.State, r.Started = len(s.runs)+1, "running", time.Now()
	s.runs = append(s.runs, r)
	s.running = r
	ctx, cancel := context.WithCancel(s.ctx)
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		v, err := fork.Run(ctx, s.cfg.Base, at, s.cfg.Agent, opts...)
		s.mu.Lock()
		defer s.mu.Unlock()
		r.Took = time.Since(r.Started)
		r.V, r.Err = v, err
		switch {
		case v != nil && v.Status == fork.StatusCanceled:
			r.State = "canceled"
		case ctx.Err() != nil && v == nil:
			r.State, r.Err = "canceled", errors.Join(errors.New("canceled"), err)
		case v == nil:
			r.State = "error"
		default:
			r.State = "done"
		}
		s.running, s.cancel = nil, nil
	}()
	return r, nil
}

// cancelRunning cancels the running fork; false when none runs.
func (s *session) cancelRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return false
	}
	s.cancel()
	return true
}

// runByID is run id, or nil.
func (s *session) runByID(id int) *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 1 || id > len(s.runs) {
		return nil
	}
	return s.runs[id-1]
}

// finished is run id when it has finished with a variant.
func (s *session) finished(id int) (*run, error) {
	r := s.runByID(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r == nil:
		return nil, fmt.Errorf("no run %d in this session", id)
	case r.State == "running":
		return nil, fmt.Errorf("run %d is still running", id)
	case r.V == nil:
		return nil, fmt.Errorf("run %d made no variant: %v", id, r.Err)
	}
	return r, nil
}

// runJSON is a run as the session list shows it.
type runJSON struct {
	ID         int      `json:"id"`
	Step       int      `json:"step"`
	Point      string   `json:"point"`
	Changes    []string `json:"changes"`
	Policy     string   `json:"policy"`
	State      string   `json:"state"`
	Status     string   `json:"status,omitempty"`
	BaseStatus string   `json:"base_status"`
	Divergence string   `json:"divergence,omitempty"`
	Cost       string   `json:"cost"` // incurred, as every text of the module shows an amount (usd.Format)
	Tokens     int64    `json:"tokens"`
	LiveModel  int      `json:"live_model_calls"`
	LiveTool   int      `json:"live_tool_calls"`
	Served     int      `json:"served"`
	Held       []string `json:"held,omitempty"`
	Unused     []string `json:"unused,omitempty"`
	Error      string   `json:"error,omitempty"`
	Seconds    float64  `json:"seconds"`
	Saved      string   `json:"saved,omitempty"`
	Wrote      string   `json:"wrote,omitempty"`
}

// listRuns is the session list, newest last.
func (s *session) listRuns() []runJSON {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]runJSON, 0, len(s.runs))
	for _, r := range s.runs {
		j := runJSON{ID: r.ID, Step: r.Step, Point: r.Point, Changes: r.Changes, Policy: policyText(r.Policy), State: r.State,
			BaseStatus: string(s.cfg.Base.Status), Saved: r.Saved, Wrote: r.Wrote}
		if j.Changes == nil {
			j.Changes = []string{}
		}
		j.Seconds = r.Took.Seconds()
		if r.State == "running" {
			j.Seconds = time.Since(r.Started).Seconds()
		}
		if r.Err != nil {
			j.Error = r.Err.Error()
		}
		if v := r.V; v != nil {
			j.Status = string(v.Status)
			if v.Err != nil && j.Error == "" {
				j.Error = firstLine(v.Err.Error())
			}
			j.Divergence = divergence(v.Diff)
			j.Cost, j.Tokens, j.LiveModel, j.LiveTool = usd.Format(v.IncurredCost), v.IncurredTokens, v.LiveModelCalls, v.LiveToolCalls
			j.Served = len(v.MemoHits) + len(v.Replayed)
			for _, h := range v.Suppressed {
				j.Held = append(j.Held, fmt.Sprintf("step %d %s '%s': %s", h.Step, h.Kind, h.Tool, h.Reason))
			}
			for _, u := range v.Unused() {
				j.Unused = append(j.Unused, u.Description)
			}
		}
		out = append(out, j)
	}
	return out
}

// policyText is a policy as the list shows it.
func policyText(p policySpec) string {
	s := "replay"
	switch {
	case p.Block:
		s = "block"
	case len(p.Allow) > 0:
		s = "allow live: " + strings.Join(p.Allow, ", ")
	}
	if p.Memoize {
		s += ", memoize"
	}
	return s
}

// divergence says where a variant first parted from its base, in one line.
func divergence(d *diff.Result) string {
	if d == nil {
		return ""
	}
	dv := d.Divergence
	if dv == nil {
		return "none: equivalent to the base"
	}
	switch dv.Kind {
	case diff.Added:
		return fmt.Sprintf("step %d: %s '%s' only in the variant", dv.Variant.Step, dv.Variant.Type, dv.Variant.Label)
	case diff.Removed:
		return fmt.Sprintf("step %d: %s '%s' only in the base", dv.Base.Step, dv.Base.Type, dv.Base.Label)
	}
	text := fmt.Sprintf("step %d: %s '%s' changed", dv.Variant.Step, dv.Variant.Type, dv.Variant.Label)
	if sd := &d.Steps[dv.Index]; len(sd.Changes) > 0 {
		text += " (" + sd.Changes[0].Path
		if n := len(sd.Changes) - 1; n > 0 {
			text += fmt.Sprintf(" and %d more", n)
		}
		text += ")"
	}
	return text
}

// save saves run id's variant as a bundle under the test's testdata
// directory, never over an existing one: testdata/explore/TEST-run-N.sftrace,
// or -2, -3, … when that exists.
func (s *session) save(id int) (string, error) {
	r, err := s.finished(id)
	if err != nil {
		return "", err
	}
	if s.cfg.Dir == "" {
		return "", errors.New("this session does not know the test's directory, so it saves nothing")
	}
	s.mu.Lock()
	if r.Saved != "" {
		s.mu.Unlock()
		return r.Saved, nil
	}
	s.mu.Unlock()
	dir := filepath.Join(s.cfg.Dir, "testdata", "explore")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := fileSafe(s.cfg.Test) + fmt.Sprintf("-run-%d", id)
	for n := 1; ; n++ {
		rel := name
		if n > 1 {
			rel = fmt.Sprintf("%s-%d", name, n)
		}
		path := filepath.Join(dir, rel+".sftrace")
		if _, err := os.Lstat(path); err == nil {
			continue
		}
		// A copy: Save records the path in the trace, which pages being
		// rendered meanwhile read. It refuses to replace a bundle that
		// appeared since the check above.
		cp := *r.V.Trace
		err := cp.Save(path)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		shown := path
		if rel, err := filepath.Rel(s.cfg.Dir, path); err == nil {
			shown = rel
		}
		s.mu.Lock()
		r.Saved = shown
		s.mu.Unlock()
		return shown, nil
	}
}

// fileSafe keeps letters, digits, '-' and '_' of a test name.
func fileSafe(name string) string {
	s := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, name)
	if s == "" {
		s = "explore"
	}
	return s
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
