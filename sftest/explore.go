package sftest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepfork/stepfork/internal/explore"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// ExploreFlag is the name of the command-line flag that makes a test
// serve the explore page of its base run and wait for a person to explore
// it: go test -run TestRefundNeedsApproval -stepfork.explore=TestRefundNeedsApproval.
//
// Its value is a regexp matched against test names (t.Name(), subtests
// included). A matching test explores the base run of its first call of
// [Fork], [Sweep], [Replay], [ForkCheck], [Minimize] or [Record]: the
// first call that hands sftest both a base run and an agent (the base of
// Record is the run it records or replays). [Load] has no agent: the run
// it loads is explored when the test passes it on with one, and a test
// that never does is told so when it ends.
//
// The session starts when the test's function has returned, passed or
// failed, before the cleanups the test registered before that call: the
// test's own checks ran undisturbed, and what its agent needs (a fake
// server, a temporary directory) is still there. It serves, on 127.0.0.1
// at an address holding a random token (printed to the terminal, even when
// go test buffers the test's output), a page where the person picks a fork
// point, changes what the run recorded there, runs the fork with the
// test's own agent in the test process, compares the runs, saves them as
// bundles, and takes home the sftest.Fork code of any of them, with the
// assertions that held, ready to paste or written as a new _test.go file
// next to the test. It waits until the person ends the session from the
// page or presses Ctrl-C; the test then ends as it would have without the
// flag. A session ends by itself 5 seconds before go test's -timeout (pass
// -timeout=0 to explore without a limit). One session runs at a time; a
// subtest of an explored test starts none of its own.
//
// The flag is defined only in test binaries (testing.Testing), and a
// session refuses to start when the environment variable CI is set to
// anything but "", "0" or "false" (the test fails, saying so), so that no
// suite can wait for a person in CI. Without the flag, the helpers check
// one string and do nothing more.
const ExploreFlag = "stepfork.explore"

var exploreFlag = new(string)

func init() {
	if testing.Testing() {
		exploreFlag = flag.String(ExploreFlag, "", "serve the explore page of the base run of each test whose name matches `regexp`, and wait until it is ended (refused under CI)")
	}
}

var (
	// exploreMu lets one session run at a time.
	exploreMu sync.Mutex
	// explored holds the names of the running tests whose session is
	// arranged (or was refused), so that a test explores once and its
	// subtests not at all; asked holds those tests themselves.
	explored sync.Map // string → bool
	asked    sync.Map // testing.TB → bool
	// exploreReady is told each session's address (tests replace it).
	exploreReady = func(url string) {}
	// terminal is where the session's messages go besides the test's
	// output (tests replace it).
	terminal = openTerminal
)

// exploring reports whether -stepfork.explore selects t and no session
// has run for it or a test around it; it marks t as explored.
func exploring(t testing.TB) (bool, error) {
	re, err := regexp.Compile(*exploreFlag)
	if err != nil {
		return false, fmt.Errorf("-%s=%q is not a valid regexp: %v", ExploreFlag, *exploreFlag, err)
	}
	name := t.Name()
	if !re.MatchString(name) {
		return false, nil
	}
	for p := name; ; {
		if _, done := explored.Load(p); done {
			return false, nil
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	if _, done := explored.LoadOrStore(name, true); done {
		return false, nil
	}
	// The mark lasts as long as the test (its session included), so that a
	// test run again (go test -count) explores again.
	t.Cleanup(func() { explored.Delete(name) })
	return true, nil
}

// inCI reports whether the environment says the tests run in CI.
func inCI() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("CI"))) {
	case "", "0", "false":
		return false
	}
	return true
}

// exploreAt arranges t's explore session when -stepfork.explore selects
// it: helper is the sftest function that was given base and agent, called
// by the test's code two frames up. The session is served when the test's
// function has returned (or failed), in a cleanup that runs before the
// cleanups the test registered earlier: the test's own checks are not
// disturbed by what the person runs, and the agent's world (servers,
// files, fakes set up before the call) is still there. The callers check
// that the flag is set first, so that without it nothing here runs.
func exploreAt(t testing.TB, helper string, base *trace.Trace, agent replay.Agent) {
	t.Helper()
	ok, err := exploring(t)
	if err != nil {
		t.Errorf("sftest: %v", err)
		return
	}
	if !ok || base == nil || agent == nil {
		return
	}
	asked.Store(t, true)
	if inCI() {
		t.Errorf("sftest: -%s is refused under CI=%s: a session waits for a person at a browser. Drop the flag from the CI's command.", ExploreFlag, os.Getenv("CI"))
		return
	}
	_, file, line, _ := runtime.Caller(2)
	cfg := explore.Config{Base: base, Agent: agent, Test: t.Name(), Site: explore.Locate(file, line, helper)}
	if wd, err := os.Getwd(); err == nil {
		cfg.Dir = wd
	}
	t.Cleanup(func() { serveExplore(t, cfg) })
}

// serveExplore serves t's session and returns when it has ended.
func serveExplore(t testing.TB, cfg explore.Config) {
	exploreMu.Lock()
	defer exploreMu.Unlock()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	until := ""
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			end := deadline.Add(-5 * time.Second)
			if time.Until(end) < 10*time.Second {
				t.Errorf("sftest: -%s: go test's -timeout leaves %s too little time to explore; run it with -timeout=0", ExploreFlag, t.Name())
				return
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, end)
			defer cancel()
			until = fmt.Sprintf("\nThe session ends by itself at %s, before go test's -timeout (-timeout=0: no limit).", end.Format("15:04:05"))
		}
	}
	what := "an in-memory run of " + cfg.Base.AgentName
	if cfg.Base.Path != "" {
		what = cfg.Base.Path
	}
	what, _ = trace.RedactString(what)
	verdict := "passed"
	if t.Failed() {
		verdict = "failed"
	}
	started := time.Now()
	err := explore.Serve(ctx, cfg, func(url string) {
		say(fmt.Sprintf("sftest: %s has %s; explore %s with its agent (-%s): open\n\t%s\nEnd the session there, or press Ctrl-C, and the test ends.%s\n",
			t.Name(), verdict, what, ExploreFlag, url, until))
		exploreReady(url)
	})
	how := "from the page"
	switch {
	case errors.Is(err, context.Canceled):
		how, err = "by Ctrl-C", nil
	case errors.Is(err, context.DeadlineExceeded):
		how, err = "before go test's -timeout", nil
	}
	if err != nil {
		t.Errorf("sftest: the explore session of %s failed: %v", t.Name(), err)
		return
	}
	msg := fmt.Sprintf("sftest: the explore session of %s ended %s after %s.", t.Name(), how, time.Since(started).Round(time.Second))
	say(msg + "\n")
	t.Log(msg)
}

// exploreLoaded notes that t loaded the bundle at path while
// -stepfork.explore is set: if t then hands sftest no agent, it is told so
// when it ends.
func exploreLoaded(t testing.TB, path string) {
	re, err := regexp.Compile(*exploreFlag)
	if err != nil || !re.MatchString(t.Name()) {
		return
	}
	if _, noted := loaded.LoadOrStore(t, true); noted {
		return
	}
	t.Cleanup(func() {
		loaded.Delete(t)
		if _, done := asked.LoadAndDelete(t); done {
			return
		}
		msg := fmt.Sprintf("sftest: -%s selects %s, which loaded %s but gave sftest no agent with it, so there was nothing to explore: pass the run to sftest.Fork, Sweep or Replay with the agent.", ExploreFlag, t.Name(), path)
		say(msg + "\n")
		t.Log(msg)
	})
}

var loaded sync.Map // testing.TB → bool

// say writes msg to the test's standard error and, when that is not a
// terminal (go test buffers the output of a package it runs among others),
// to the terminal too, so that the person sees the session's address while
// the test waits.
func say(msg string) {
	fmt.Fprint(os.Stderr, msg)
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return
	}
	if w := terminal(); w != nil {
		fmt.Fprint(w, msg)
		w.Close()
	}
}

// openTerminal opens the process's controlling terminal, or returns nil.
func openTerminal() io.WriteCloser {
	if runtime.GOOS == "windows" {
		return nil
	}
	f, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		return nil
	}
	return f
}
