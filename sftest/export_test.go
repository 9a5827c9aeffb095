package sftest

import (
	"io"
	"testing"
	"time"
)

// Hooks of the explore session for the tests of package sftest_test.

// SetExploreHooks makes each session tell ready its address, and the
// messages meant for the terminal go to term (nil: none); it returns a
// function restoring both.
func SetExploreHooks(ready func(url string), term func() io.WriteCloser) (restore func()) {
	r, tm := exploreReady, terminal
	exploreReady, terminal = ready, term
	return func() { exploreReady, terminal = r, tm }
}

// SetProgress makes the progress of sweeps and corpora log every period
// (0: after every unit but the corpus's last) to log instead of the test's
// log; it returns a function restoring both. Tests calling it must not be
// parallel.
func SetProgress(every time.Duration, log func(line string)) (restore func()) {
	e, l := progressEvery, progressLog
	progressEvery = every
	progressLog = func(_ testing.TB, line string) { log(line) }
	return func() { progressEvery, progressLog = e, l }
}
