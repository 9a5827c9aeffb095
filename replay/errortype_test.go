package replay

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

type timeoutError struct{ Err error }

func (e *timeoutError) Error() string { return "timed out" }
func (e *timeoutError) Unwrap() error { return e.Err }

type typedError struct{}

func (typedError) Error() string     { return "typed" }
func (typedError) ErrorType() string { return "RateLimit" }

func TestErrorTypeNamesTheInnermostNamedType(t *testing.T) {
	t.Parallel()
	plain := errors.New("boom")
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"errors.New", plain, "error"},
		{"fmt.Errorf without %w", fmt.Errorf("lookup: %v", plain), "error"},
		{"fmt.Errorf around errors.New", fmt.Errorf("lookup: %w", plain), "error"},
		{"two %w", fmt.Errorf("a: %w, b: %w", plain, plain), "error"},
		{"errors.Join", errors.Join(plain, plain), "error"},
		{"a named type", &timeoutError{}, "replay.timeoutError"},
		{"a named type wrapping errors.New", &timeoutError{Err: plain}, "replay.timeoutError"},
		{"fmt.Errorf around a named type", fmt.Errorf("search: %w", &timeoutError{Err: plain}), "replay.timeoutError"},
		{"the innermost of two named types", &fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, "syscall.Errno"},
		{"a context deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), "context.deadlineExceededError"},
		{"ErrorType wins", fmt.Errorf("x: %w", &timeoutError{Err: typedError{}}), "RateLimit"},
		{"a panic", panicError{"oops"}, "panic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, errorType(tc.err))
		})
	}
}

func TestSameErrorTypeAcceptsOldCarrierNames(t *testing.T) {
	t.Parallel()
	assert.True(t, sameErrorType("error", "errors.errorString"), "a recording made before plain errors were named 'error'")
	assert.True(t, sameErrorType("error", "fmt.wrapError"))
	assert.True(t, sameErrorType("ValueError", "ValueError"))
	assert.False(t, sameErrorType("error", "ValueError"))
	assert.False(t, sameErrorType("replay.timeoutError", "errors.errorString"))
}
