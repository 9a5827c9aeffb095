package sftest_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/sftest"
)

// These tests set -stepfork.explore, which every helper reads: none of
// them is parallel, so that no parallel test runs while they set it (go
// test resumes the parallel tests after the sequential ones).

// setExplore sets -stepfork.explore for the rest of the test.
func setExplore(t *testing.T, value string) {
	t.Helper()
	if err := flag.Set(sftest.ExploreFlag, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set(sftest.ExploreFlag, "") })
}

// buffer is a terminal that keeps what it is told.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *buffer) Close() error                { return nil }
func (b *buffer) String() string              { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// session drives an explore session over HTTP, as the page does.
type session struct {
	t   *testing.T
	url string
}

func (s session) do(method, path string, body, into any) int {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, r)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Stepfork-Token", strings.Split(s.url, "/")[4])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Error(err)
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			s.t.Errorf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// Without the flag no session starts: the helpers check one string.
func TestExploreOff(t *testing.T) {
	restore := sftest.SetExploreHooks(func(string) { t.Error("a session started without -stepfork.explore") }, nil)
	defer restore()
	base := loadRefund(t)
	allocs := testing.AllocsPerRun(20, func() {
		if f := flag.Lookup(sftest.ExploreFlag); f.Value.String() != "" {
			t.Fatal("the flag is set")
		}
	})
	if allocs != 0 {
		t.Errorf("checking the flag allocates %v times", allocs)
	}
	v := sftest.Fork(t, base, fork.Failure(), refund.Agent)
	assert.Equivalent(t, v)
	// A regexp that names another test starts nothing either.
	setExplore(t, "^TestSomethingElse$")
	sftest.Fork(t, base, fork.Failure(), refund.Agent)
}

// The flag starts a session at the first call given a base and an agent;
// the page's requests fork with the test's agent; the code names the base
// and the agent as the test does; ending the session lets the test go on.
func TestExploreSession(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the terminal is /dev/tty")
	}
	// CI machines set CI=true, which refuses a session (TestExploreRefusedInCI):
	// this test is the person at the terminal.
	t.Setenv("CI", "")
	term := &buffer{}
	urls := make(chan string, 2)
	restore := sftest.SetExploreHooks(func(u string) { urls <- u }, func() io.WriteCloser { return term })
	defer restore()
	setExplore(t, "^TestExploreSession/(explored|interrupted)$")
	// served is closed when a subtest has returned: its session, if one
	// started, was served in its cleanups, so a driver still waiting for an
	// address then waits for nothing and says so instead of hanging.
	served := make(chan struct{})
	next := func() (string, bool) {
		select {
		case u := <-urls:
			return u, true
		case <-served:
			select {
			case u := <-urls:
				return u, true
			default:
				t.Error("no explore session started")
				return "", false
			}
		}
	}

	var got struct {
		snippet string
		status  string
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		u, ok := next()
		if !ok {
			return
		}
		s := session{t: t, url: u}
		var points []struct {
			Step    int  `json:"step"`
			Failure bool `json:"failure"`
		}
		s.do("GET", "api/points", nil, &points)
		step := -1
		for _, p := range points {
			if p.Failure {
				step = p.Step
			}
		}
		var run struct{ ID int }
		if code := s.do("POST", "api/run", map[string]any{"step": step, "changes": []map[string]any{
			{"kind": "prompt", "target": "decide", "op": "append", "text": " Refunds above the policy limit need approval."}}}, &run); code != http.StatusAccepted {
			t.Errorf("POST api/run: %d", code)
		}
		for range 500 {
			var runs []struct{ State, Status string }
			s.do("GET", "api/runs", nil, &runs)
			if len(runs) == 1 && runs[0].State != "running" {
				got.status = runs[0].Status
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		var code struct{ Snippet, File string }
		s.do("GET", "api/code/1", nil, &code)
		got.snippet = code.Snippet
		if !strings.Contains(code.File, "base := sftest.Load(t, \"testdata/refund-failure.sftrace\")") {
			t.Errorf("the test file does not load the base as the test does:\n%s", code.File)
		}
		s.do("POST", "api/end", map[string]any{}, nil)
	}()
	t.Run("explored", func(t *testing.T) {
		base := sftest.Load(t, "testdata/refund-failure.sftrace")
		v := sftest.Fork(t, base, fork.Failure(), refund.Agent)
		assert.Equivalent(t, v) // the test runs as it would have; the session follows
	})
	close(served)
	<-done
	if got.status != "completed" {
		t.Errorf("the session's fork ended %q, want completed", got.status)
	}
	for _, want := range []string{"v := sftest.Fork(t, base, fork.Failure(), refund.Agent,", `fork.PromptAppend("decide", " Refunds above the policy limit need approval.")`,
		"assert.Completed(t, v)", `assert.ToolNotCalled(t, v, "issue_refund")`} {
		if !strings.Contains(got.snippet, want) {
			t.Errorf("the code lacks %s:\n%s", want, got.snippet)
		}
	}
	if out := term.String(); !strings.Contains(out, "TestExploreSession/explored has passed; explore testdata/refund-failure.sftrace") ||
		!strings.Contains(out, "ended from the page") {
		t.Errorf("the terminal was told:\n%s", out)
	}

	// Ctrl-C ends a session too, and the test goes on.
	served = make(chan struct{})
	interrupted := make(chan struct{})
	go func() {
		defer close(interrupted)
		if _, ok := next(); ok {
			syscall.Kill(os.Getpid(), syscall.SIGINT)
		}
	}()
	t.Run("interrupted", func(t *testing.T) {
		base := loadRefund(t)
		sftest.Replay(t, base, refund.Agent)
	})
	close(served)
	<-interrupted
	if out := term.String(); !strings.Contains(out, "interrupted ended by Ctrl-C") {
		t.Errorf("the terminal was told:\n%s", out)
	}
}

// CI refuses a session: the test fails, saying why, and nothing waits.
func TestExploreRefusedInCI(t *testing.T) {
	restore := sftest.SetExploreHooks(func(string) { t.Error("a session started under CI") }, nil)
	defer restore()
	t.Setenv("CI", "true")
	setExplore(t, "TestExploreRefusedInCI")
	ft := &fakeT{TB: t}
	v := sftest.Fork(ft, loadRefund(t), fork.Failure(), refund.Agent)
	if v == nil || len(ft.msgs) != 1 || !strings.Contains(ft.msgs[0], "-stepfork.explore is refused under CI=true") {
		t.Errorf("messages %q", ft.msgs)
	}
}

// A test that loads a run and hands sftest no agent is told that there
// was nothing to explore.
func TestExploreLoadOnly(t *testing.T) {
	term := &buffer{}
	restore := sftest.SetExploreHooks(func(string) { t.Error("a session started without an agent") }, func() io.WriteCloser { return term })
	defer restore()
	setExplore(t, "^TestExploreLoadOnly/load$")
	t.Run("load", func(t *testing.T) { loadRefund(t) })
	if !strings.Contains(term.String(), "loaded testdata/refund-failure.sftrace but gave sftest no agent with it") {
		t.Errorf("the terminal was told:\n%s", term.String())
	}
}
