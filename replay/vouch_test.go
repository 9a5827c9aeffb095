package replay

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/internal/vouch"
	"github.com/stepfork/stepfork/trace"
)

type vouchIn struct {
	Q      string `json:"q"`
	APIKey string `json:"api_key,omitempty"`
}

type vouchOut struct {
	Hits  int    `json:"hits"`
	Token string `json:"token,omitempty"`
}

// vouchAgent records tool calls with clean payloads, with secrets (a
// sensitive key, a credential in a value), a failing call, nodes and
// state writes.
func vouchAgent(ctx context.Context, _ trace.Value) (any, error) {
	search := Tool("search", func(_ context.Context, in vouchIn) (vouchOut, error) {
		if in.Q == "fail" {
			return vouchOut{}, errors.New("no such city")
		}
		out := vouchOut{Hits: len(in.Q)}
		if in.Q == "leak" {
			out.Token = "sk-proj-abcdefghijklmnop0123456789"
		}
		return out, nil
	})
	for i, q := range []string{"lisbon", "porto", "leak", "fail", "faro"} {
		err := Node(ctx, "n"+q, func(ctx context.Context) error {
			in := vouchIn{Q: q}
			switch i {
			case 1:
				in.APIKey = "hunter2-secret"
			case 4:
				in.APIKey = trace.Redacted // already redacted: nothing to redact
			}
			out, err := search(ctx, in)
			if err != nil {
				return nil // the failure is recorded; the run goes on
			}
			return Set(ctx, q+"_hits", out)
		})
		if err != nil {
			return nil, err
		}
	}
	return "done", nil
}

// computed is what a Prepared computes for event i without a vouch.
func computed(ev *trace.Event) (in, out string, clean bool) {
	var buf [4 * sha256.Size]byte
	in, out = payloadHashes(buf[:0], ev)
	_, entries, err := trace.RedactEvent(*ev)
	return in, out, err == nil && len(entries) == 0
}

// TestVouchAgreesWithComputation checks that what a recording vouches for
// is what the first replay would compute, event by event, and that events
// holding secrets are not vouched for as clean.
func TestVouchAgreesWithComputation(t *testing.T) {
	t.Parallel()
	res, err := Record(context.Background(), "vouch", nil, vouchAgent)
	require.NoError(t, err)
	p := Prepare(res.Trace)
	require.NotNil(t, p.vouch, "a recording of this process is vouched for")
	vouched := 0
	for i := range res.Trace.Events {
		ev := &res.Trace.Events[i]
		in, out, clean := computed(ev)
		if p.vouch.IsClean(i) {
			vouched++
		}
		gotIn, gotOut := p.hashesOf(i)
		require.Equal(t, [2]string{in, out}, [2]string{gotIn, gotOut}, "hashes of event %d (%s)", i, ev.Type)
		require.Equal(t, clean, p.cleanAt(i), "clean of event %d (%s)", i, ev.Type)
		if clean && len(ev.Redactions) == 0 && (ev.Type == trace.ToolCall || ev.Type == trace.ToolResult) {
			require.True(t, p.vouch.IsClean(i), "a clean %s (event %d) is vouched for", ev.Type, i)
		}
	}
	require.Greater(t, vouched, len(res.Trace.Events)/2, "most events are vouched for")
	require.Less(t, vouched, len(res.Trace.Events), "events that held secrets are not")
}

// TestVouchIgnoresEventsChangedInPlace changes one event of a recorded
// trace in place: where the change could matter, that event is computed
// again (the others keep the vouch), and a replay of the changed trace
// gives what a replay of a copy (no vouch) gives, event for event.
func TestVouchIgnoresEventsChangedInPlace(t *testing.T) {
	t.Parallel()
	edits := []struct {
		name   string
		edit   func(ev *trace.Event)
		digest bool // the digest sees the change
	}{
		{"output", func(ev *trace.Event) { ev.Output = trace.MustParse(`{"hits":99}`) }, true},
		{"output with a secret", func(ev *trace.Event) { ev.Output = trace.MustParse(`{"password":"hunter2"}`) }, true},
		{"output with a credential", func(ev *trace.Event) { ev.Output = trace.MustParse(`{"hits":"sk-proj-abcdefghijklmnop012345"}`) }, true},
		{"output hash", func(ev *trace.Event) { ev.OutputHash = string(make([]byte, 64)) }, true},
		{"name with a credential", func(ev *trace.Event) { ev.Name = "ghp_abcdefghijklmnopqrstuvwxyz0123456789" }, true},
		{"type", func(ev *trace.Event) { ev.Type = trace.ToolCall }, true},
		// Protected fields: a credential there makes the redaction pass
		// refuse the event, which is then kept as it is either way.
		{"redactions", func(ev *trace.Event) { ev.Redactions = []string{"/output/hits"} }, false},
		{"id with a credential", func(ev *trace.Event) { ev.ID = "ghp_abcdefghijklmnopqrstuvwxyz0123456789" }, false},
		{"parent with a credential", func(ev *trace.Event) { ev.ParentID = "sk-proj-abcdefghijklmnop012345" }, false},
	}
	for _, tc := range edits {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := Record(context.Background(), "vouch", nil, vouchAgent)
			require.NoError(t, err)
			evs := res.Trace.Events
			k := -1
			for i := range evs {
				if evs[i].Type == trace.ToolResult && evs[i].Status == trace.StatusOK {
					k = i
					break
				}
			}
			require.GreaterOrEqual(t, k, 0)
			tc.edit(&evs[k])
			p := Prepare(res.Trace)
			require.NotNil(t, p.vouch)
			require.Equal(t, !tc.digest, p.vouch.Holds(k, &evs[k]), "the vouch of the changed event")
			if tc.digest {
				for i := range evs {
					in, out, clean := computed(&evs[i])
					gotIn, gotOut := p.hashesOf(i)
					require.Equal(t, [2]string{in, out}, [2]string{gotIn, gotOut}, "hashes of event %d", i)
					require.Equal(t, clean, p.cleanAt(i), "clean of event %d", i)
				}
			}
			copied := *res.Trace
			copied.Events = append([]trace.Event(nil), evs...)
			require.Nil(t, vouch.Of(copied.Events))
			got, gotErr := Replay(context.Background(), res.Trace, vouchAgent)
			want, wantErr := Replay(context.Background(), &copied, vouchAgent)
			require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(gotErr))
			require.Equal(t, normalized(want.Trace, evs), normalized(got.Trace, evs))
			require.Equal(t, redactionPaths(want.Trace), redactionPaths(got.Trace))
		})
	}
}

// normalized is tr's events without run id, times and durations, and
// with every id not taken from the base events replaced by its position.
func normalized(tr *trace.Trace, base []trace.Event) []trace.Event {
	known := map[string]bool{}
	for _, ev := range base {
		known[ev.ID] = true
	}
	name := map[string]string{}
	for i, ev := range tr.Events {
		if !known[ev.ID] {
			name[ev.ID] = fmt.Sprint("#", i)
		}
	}
	out := make([]trace.Event, len(tr.Events))
	for i, ev := range tr.Events {
		ev.RunID, ev.Timestamp, ev.DurationMS = "", time.Time{}, nil
		if n, ok := name[ev.ID]; ok {
			ev.ID = n
		}
		if n, ok := name[ev.ParentID]; ok {
			ev.ParentID = n
		}
		out[i] = ev
	}
	return out
}

func redactionPaths(tr *trace.Trace) []string {
	var out []string
	for _, e := range tr.Redactions {
		out = append(out, e.Path+" "+e.Reason)
	}
	return out
}

// TestVouchOnlyForTheRecordedArray checks that a copy of a recorded
// trace's events, or a shorter slice of them, is not vouched for.
func TestVouchOnlyForTheRecordedArray(t *testing.T) {
	t.Parallel()
	res, err := Record(context.Background(), "vouch", nil, vouchAgent)
	require.NoError(t, err)
	require.NotNil(t, vouch.Of(res.Trace.Events))
	require.Nil(t, vouch.Of(append([]trace.Event(nil), res.Trace.Events...)))
	require.Nil(t, vouch.Of(res.Trace.Events[:len(res.Trace.Events)-1]))
	replayed, err := Replay(context.Background(), res.Trace, vouchAgent)
	require.NoError(t, err)
	require.Nil(t, vouch.Of(replayed.Trace.Events), "only recordings vouch")
}
