// Package failures keeps the failed assertions of the tests that asked for
// them, so that the page sftest writes of a failed test starts with every
// assertion that failed: which, where in the test, its message, and the
// step it names.
//
// sftest [Watch]es a test when it first handles a variant, a sweep or a
// golden in it; package assert [Note]s each failure of a watched test;
// sftest reads them ([Of]) when it writes the test's pages, and [Forget]s
// the test once it has ended. A test nobody watches keeps nothing.
package failures

import (
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Failure is one failed assertion.
type Failure struct {
	// Assertion is the function that failed, as the test wrote it:
	// "assert.Completed".
	Assertion string
	// Where is the test's line that called it: "refund_test.go:42".
	Where string
	// Message is what the assertion reported.
	Message string
	// Step is the step the failure is about, when the assertion knows it
	// (the first divergence of a diverging check); -1 otherwise.
	Step int
	// Variant is the sweep variant whose check failed, for a failure kept
	// for the test that ran the sweep ("" otherwise).
	Variant string
}

// maxPerTest bounds what a test keeps: a loop of failing assertions keeps
// its first ones.
const maxPerTest = 100

var (
	mu      sync.Mutex
	watched = map[any][]Failure{}
)

// Watch starts keeping the failures of t (a testing.TB). It reports
// whether t was not watched yet.
func Watch(t any) bool {
	if !keyable(t) {
		return false
	}
	mu.Lock()
	defer mu.Unlock()
	if _, ok := watched[t]; ok {
		return false
	}
	watched[t] = nil
	return true
}

// Note keeps a failure of t, when t is watched: its message, and the step
// it is about (-1 for none known). skip is the number of frames between
// Note's caller and the assertion the test called: Note names that
// assertion and the test line that called it.
func Note(t any, message string, step, skip int) {
	if !keyable(t) {
		return
	}
	mu.Lock()
	list, ok := watched[t]
	mu.Unlock()
	if !ok || len(list) >= maxPerTest {
		return
	}
	f := Failure{Message: message, Step: step}
	pcs := make([]uintptr, 2)
	if n := runtime.Callers(skip+2, pcs); n > 0 {
		frames := runtime.CallersFrames(pcs[:n])
		fr, more := frames.Next()
		f.Assertion = shortFunc(fr.Function)
		if more {
			fr, _ = frames.Next()
			f.Where = filepath.Base(fr.File) + ":" + strconv.Itoa(fr.Line)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if list, ok := watched[t]; ok && len(list) < maxPerTest {
		watched[t] = append(list, f)
	}
}

// Keep keeps f for t, when t is watched: a failure of a subtest kept for
// its parent too.
func Keep(t any, f Failure) {
	if !keyable(t) {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if list, ok := watched[t]; ok && len(list) < maxPerTest {
		watched[t] = append(list, f)
	}
}

// Of returns the failures kept for t, in the order they happened.
func Of(t any) []Failure {
	if !keyable(t) {
		return nil
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]Failure(nil), watched[t]...)
}

// Forget stops watching t and drops what was kept for it.
func Forget(t any) {
	if !keyable(t) {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	delete(watched, t)
}

// keyable reports whether t can key the map: a non-nil pointer, as every
// testing.TB is. Another implementation of assert.TestingT (a value type
// holding a slice, say) would make the map panic; nobody watches it.
func keyable(t any) bool {
	v := reflect.ValueOf(t)
	return v.Kind() == reflect.Pointer && !v.IsNil()
}

// shortFunc is a function's package and name, without its import path or
// type parameters: "assert.Completed".
func shortFunc(name string) string {
	name, _, _ = strings.Cut(name, "[")
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	return name
}
