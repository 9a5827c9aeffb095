package replay_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	sfassert "github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// secretsAgent logs in (the tool returns a credential), hands the token on
// to another tool, under a sensitive key and inside a longer text, writes
// it to state and returns it: every event after login carries the secret.
func secretsAgent() replay.Agent {
	login := replay.Tool("login", func(ctx context.Context, user string) (map[string]string, error) {
		return map[string]string{"user": user, "token": "sk-" + strings.Repeat("A1b2", 10)}, nil
	})
	fetch := replay.Tool("fetch", func(ctx context.Context, in map[string]string) (string, error) {
		return "ok", nil
	})
	return func(ctx context.Context, _ trace.Value) (any, error) {
		creds, err := login(ctx, "ann")
		if err != nil {
			return nil, err
		}
		tok := creds["token"]
		out, err := fetch(ctx, map[string]string{"api_key": tok, "header": "Authorization: Bearer " + tok, "note": "token=" + tok})
		if err != nil {
			return nil, err
		}
		if err := replay.Set(ctx, "session", map[string]string{"token": tok}); err != nil {
			return nil, err
		}
		return map[string]string{"fetched": out, "token": tok}, nil
	}
}

// TestFrozenReplayKeepsRedactionRecords: a secret that reaches later calls
// through a served value arrives there already "[REDACTED]", so redacting
// it again finds nothing; the replay's trace must still carry the records
// of the recording, event for event, so that an unchanged agent replays to
// the same trace.
func TestFrozenReplayKeepsRedactionRecords(t *testing.T) {
	t.Parallel()
	agent := secretsAgent()
	rec, err := replay.Record(context.Background(), "secrets", nil, agent)
	require.NoError(t, err)
	require.NoError(t, rec.Err)
	base := rec.Trace
	redactedEvents := 0
	for _, ev := range base.Events {
		if len(ev.Redactions) > 0 {
			redactedEvents++
		}
		assert.NotContains(t, ev.Input.Canonical()+ev.Output.Canonical()+ev.After.Canonical(), "A1b2", "the secret reached the trace")
	}
	require.Equal(t, 4, redactedEvents, "login's result, fetch's call, the state write and run_end are redacted")

	for _, p := range []*replay.Prepared{replay.Prepare(base), replay.Prepare(base)} {
		res, err := p.Replay(context.Background(), agent)
		require.NoError(t, err)
		require.Len(t, res.Trace.Events, len(base.Events))
		for i := range base.Events {
			assert.Equal(t, base.Events[i].Redactions, res.Trace.Events[i].Redactions, "event %d (%s %s)", i, base.Events[i].Type, base.Events[i].Label())
		}
		assert.Equal(t, base.Redactions, res.Trace.Redactions)
		assert.NoError(t, sfassert.CheckTraceEqual(base, res.Trace))
	}
}
