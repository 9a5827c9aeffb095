package providers_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stepfork/stepfork/internal/fakeprovider"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// wrap types an agent builder as replay.Agent.
func wrap(f func(*testing.T, *fakeprovider.Server, *http.Client) func(context.Context, trace.Value) (any, error)) func(*testing.T, *fakeprovider.Server, *http.Client) replay.Agent {
	return func(t *testing.T, s *fakeprovider.Server, c *http.Client) replay.Agent { return f(t, s, c) }
}
