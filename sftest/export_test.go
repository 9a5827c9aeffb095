package sftest

import "io"

// Hooks of the explore session for the tests of package sftest_test.

// SetExploreHooks makes each session tell ready its address, and the
// messages meant for the terminal go to term (nil: none); it returns a
// function restoring both.
func SetExploreHooks(ready func(url string), term func() io.WriteCloser) (restore func()) {
	r, tm := exploreReady, terminal
	exploreReady, terminal = ready, term
	return func() { exploreReady, terminal = r, tm }
}
