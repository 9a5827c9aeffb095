package replay

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/trace"
)

// echoCalls is an agent that re-issues the tool calls of base with their
// recorded inputs, as the agent that recorded a loaded trace does.
func echoCalls(base *trace.Trace) Agent {
	var ins []trace.Event
	for _, ev := range base.Events {
		if ev.Type == trace.ToolCall {
			ins = append(ins, ev)
		}
	}
	return func(ctx context.Context, _ trace.Value) (any, error) {
		var last trace.Value
		for _, ev := range ins {
			out, err := Tool(ev.Name, func(context.Context, trace.Value) (trace.Value, error) {
				return trace.Value{}, fmt.Errorf("tool %s executed", ev.Name)
			})(ctx, ev.Input)
			if err != nil {
				return nil, err
			}
			last = out
		}
		return last, nil
	}
}

// TestCleanInputFastPathIsExact replays bases whose recorded inputs hold
// what redaction changes, or what only looks like it, as a loaded trace
// may (nothing vouched for): the replay that takes a live input equal to
// the recorded one for clean when the recorded input alone holds nothing
// to redact gives, event for event, what the replay that redacts every
// live input gives.
func TestCleanInputFastPathIsExact(t *testing.T) {
	t.Parallel()
	inputs := []struct {
		name  string
		input string
		id    string // the call event's id, when not the recorded one
	}{
		{"clean", `{"q":"lisbon"}`, ""},
		{"sensitive key", `{"password":"hunter2","q":"x"}`, ""},
		{"already redacted", `{"api_key":"[REDACTED]","q":"x"}`, ""},
		{"credential in a value", `{"q":"use sk-proj-abcdefghijklmnop0123456789 now"}`, ""},
		{"credential in a key", `{"ghp_abcdefghijklmnopqrstuvwxyz0123456789":1}`, ""},
		{"anchor without a secret", `{"max_tokens":512,"messages":[{"content":"the key to it","role":"user"}]}`, ""},
		{"unicode escapes", `{"q":"caf\u00e9 \u0041\ud83d\ude80 p\u0061ssword"}`, ""},
		{"escaped sensitive key", `{"p\u0061ssword":"hunter2"}`, ""},
		{"huge numbers", `{"n":123456789012345678901234567890,"f":1e300}`, ""},
		{"deep nesting", `{"a":{"b":[[{"c":{"token":"t0k3n-value"}}]]}}`, ""},
		{"duplicate-looking keys", `{"Secret":"a","secret_":"b","sEcReT":"c"}`, ""},
		{"credential in the id", `{"q":"lisbon"}`, "ghp_abcdefghijklmnopqrstuvwxyz0123456789"},
	}
	for _, tc := range inputs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := Record(context.Background(), "clean", nil, func(ctx context.Context, _ trace.Value) (any, error) {
				echo := Tool("echo", func(_ context.Context, in trace.Value) (trace.Value, error) {
					return trace.MustParse(`{"ok":true}`), nil
				})
				for range 3 {
					if _, err := echo(ctx, trace.MustParse(`{"q":"placeholder"}`)); err != nil {
						return nil, err
					}
				}
				return "done", nil
			})
			require.NoError(t, err)
			// A base as a loaded trace is: its own events array, the
			// second call's input (and hash) changed in it.
			base := *res.Trace
			base.Events = append([]trace.Event(nil), res.Trace.Events...)
			n := 0
			for i := range base.Events {
				ev := &base.Events[i]
				if ev.Type != trace.ToolCall {
					continue
				}
				if n++; n == 2 {
					ev.Input = trace.MustParse(tc.input)
					ev.InputHash = trace.Hash(ev.Input)
					if tc.id != "" {
						old := ev.ID
						ev.ID = tc.id
						for j := range base.Events {
							if base.Events[j].ParentID == old {
								base.Events[j].ParentID = tc.id
							}
						}
					}
				}
			}
			agent := echoCalls(&base)
			run := func(slow bool) (*Result, error) {
				p := prepare(&base)
				if slow {
					for i := range p.cleanState {
						p.settle(i, callInput, false) // every live input redacted
					}
				}
				return p.Replay(context.Background(), agent)
			}
			want, wantErr := run(true)
			got, gotErr := run(false)
			require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(gotErr))
			require.Equal(t, normalized(want.Trace, base.Events), normalized(got.Trace, base.Events))
			require.Equal(t, redactionPaths(want.Trace), redactionPaths(got.Trace))
			require.Equal(t, want.Served, got.Served)
		})
	}
}

// TestInputCleanAtAgreesWithRedaction checks the per-call verdict against
// its definition: clean exactly when redacting the recorded input finds
// nothing, and implied by a clean call event.
func TestInputCleanAtAgreesWithRedaction(t *testing.T) {
	t.Parallel()
	res, err := Record(context.Background(), "vouch", nil, vouchAgent)
	require.NoError(t, err)
	for _, evs := range [][]trace.Event{res.Trace.Events, append([]trace.Event(nil), res.Trace.Events...)} {
		tr := *res.Trace
		tr.Events = evs
		p := prepare(&tr)
		for i := range p.calls {
			r := &p.calls[i]
			_, found := trace.RedactValue(inputOf(r.Call))
			require.Equal(t, len(found) == 0, p.inputCleanAt(r), "call %d", i)
			if p.cleanAt(r.event) {
				require.True(t, p.inputCleanAt(r), "call %d: a clean event has a clean input", i)
			}
		}
	}
}

// contentAgent writes state, clean and with secrets, in nodes, and calls a
// tool.
func contentAgent(ctx context.Context, _ trace.Value) (any, error) {
	search := Tool("search", func(_ context.Context, in vouchIn) (vouchOut, error) { return vouchOut{Hits: len(in.Q)}, nil })
	for _, q := range []string{"lisbon", "porto"} {
		err := Node(ctx, "n"+q, func(ctx context.Context) error {
			if _, err := search(ctx, vouchIn{Q: q}); err != nil {
				return err
			}
			for _, kv := range [][2]string{{"plain", q}, {"password", "hunter2"}, {"note", "use sk-proj-abcdefghijklmnop0123456789"}} {
				if err := Set(ctx, kv[0], kv[1]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return "done", nil
}

// TestContentCleanFastPathIsExact replays bases (their own events arrays,
// nothing vouched for) whose events hold credentials in their protected
// fields (ids, run id, hashes, redactions list), where a pass over the
// whole event refuses it: the replay that takes a new event equal to a
// base event whose other fields hold nothing to redact for clean gives,
// event for event, what the replay that redacts every new event gives.
func TestContentCleanFastPathIsExact(t *testing.T) {
	t.Parallel()
	const cred = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	edits := []struct {
		name string
		edit func(evs []trace.Event)
	}{
		{"none", func([]trace.Event) {}},
		{"id of a state write", func(evs []trace.Event) {
			for i := range evs {
				if evs[i].Type == trace.StateChange && evs[i].Key == "plain" {
					evs[i].ID = cred
					return
				}
			}
		}},
		{"id of a node", func(evs []trace.Event) {
			old := evs[1].ID
			evs[1].ID = cred
			for i := range evs {
				if evs[i].ParentID == old {
					evs[i].ParentID = cred
				}
			}
		}},
		{"run id", func(evs []trace.Event) {
			for i := range evs {
				evs[i].RunID = cred
			}
		}},
		{"hash of a marker", func(evs []trace.Event) { evs[1].InputHash = cred }},
		{"redactions list", func(evs []trace.Event) {
			for i := range evs {
				if evs[i].Type == trace.StateChange && evs[i].Key == "password" {
					evs[i].Redactions = append(evs[i].Redactions, "/after/"+cred)
				}
			}
		}},
		{"unredacted credential", func(evs []trace.Event) {
			for i := range evs {
				if evs[i].Type == trace.StateChange && evs[i].Key == "note" {
					evs[i].After, evs[i].Redactions = trace.StringValue("use sk-proj-abcdefghijklmnop0123456789"), nil
					return
				}
			}
		}},
		{"credential in a name", func(evs []trace.Event) {
			for i := range evs {
				if evs[i].Type == trace.ToolResult {
					evs[i].Name = "search sk-proj-abcdefghijklmnop0123456789"
					return
				}
			}
		}},
		{"unredacted secret", func(evs []trace.Event) {
			for i := range evs {
				if evs[i].Type == trace.StateChange && evs[i].Key == "password" {
					evs[i].After, evs[i].Redactions = trace.StringValue("hunter2"), nil
					return
				}
			}
		}},
	}
	for _, tc := range edits {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := Record(context.Background(), "content", nil, contentAgent)
			require.NoError(t, err)
			base := *res.Trace
			base.Events = append([]trace.Event(nil), res.Trace.Events...)
			tc.edit(base.Events)
			run := func(slow bool) (*Result, error) {
				p := prepare(&base)
				if slow {
					for i := range p.cleanState {
						p.settle(i, eventContent, false) // every new event redacted
					}
				}
				return p.Replay(context.Background(), contentAgent)
			}
			want, wantErr := run(true)
			got, gotErr := run(false)
			require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(gotErr))
			require.Equal(t, normalized(want.Trace, base.Events), normalized(got.Trace, base.Events))
			require.Equal(t, redactionPaths(want.Trace), redactionPaths(got.Trace))
		})
	}
}

// TestContentCleanAtAgreesWithRedaction checks the per-event verdict
// against its definition: a redaction pass over the event with its
// protected fields cleared finds nothing; and a clean event is content
// clean.
func TestContentCleanAtAgreesWithRedaction(t *testing.T) {
	t.Parallel()
	for _, agent := range []Agent{vouchAgent, contentAgent} {
		res, err := Record(context.Background(), "content", nil, agent)
		require.NoError(t, err)
		tr := *res.Trace
		tr.Events = append([]trace.Event(nil), res.Trace.Events...)
		tr.Events[2].ID = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
		tr.Events[3].Message = "sk-proj-abcdefghijklmnop0123456789"
		tr.Events[4].Output = trace.MustParse(`{"password":"hunter2"}`)
		p := prepare(&tr)
		dirty := 0
		for i := range tr.Events {
			ev := tr.Events[i]
			ev.ID, ev.RunID, ev.ParentID, ev.InputHash, ev.OutputHash, ev.Redactions = "", "", "", "", "", nil
			_, entries, err := trace.RedactEvent(ev)
			require.NoError(t, err)
			require.Equal(t, len(entries) == 0, p.contentCleanAt(i), "event %d (%s)", i, ev.Type)
			if len(entries) > 0 {
				dirty++
			}
			if p.cleanAt(i) {
				require.True(t, p.contentCleanAt(i), "event %d: a clean event is content clean", i)
			}
		}
		require.GreaterOrEqual(t, dirty, 2, "events with something to redact")
	}
}

// TestValueOfValueIsTraceValueOf checks that a trace.Value handed to a
// wrapper is recorded as trace.ValueOf records it (its text, null when
// absent), though without a copy of the text.
func TestValueOfValueIsTraceValueOf(t *testing.T) {
	t.Parallel()
	for _, v := range []trace.Value{{}, trace.NullValue, trace.MustParse(`{"a":[1,"\u00e9",{"b":null}]}`), trace.StringValue("x"), trace.MustParse(`123456789012345678901234567890`)} {
		want, wantErr := trace.ValueOf(v)
		got, err := valueOf(v)
		require.Equal(t, wantErr, err)
		require.Equal(t, want, got, "%#v", v)
		require.Equal(t, want.Canonical(), got.Canonical())
	}
}

// TestFillMarker checks that fillMarker sets every field trace.MarkerEvent
// sets, for markers of every shape.
func TestFillMarker(t *testing.T) {
	v, err := trace.ParseValue([]byte(`{"a":[1,"x"]}`))
	require.NoError(t, err)
	for _, m := range []trace.Marker{
		{Key: trace.MarkerNode, Name: "n", Phase: trace.PhaseEnter},
		{Key: trace.MarkerNode, Name: "n", Phase: trace.PhaseExit, Status: trace.NodeStatusFail, Error: "boom"},
		{Key: trace.MarkerRead, Name: "k"},
		{Key: trace.MarkerDecision, Name: "route", Kind: trace.KindApproval, Value: v, Forced: true},
		{Key: trace.MarkerEffect, Name: "e", ErrorType: "E", Error: "msg"},
	} {
		var ev trace.Event
		fillMarker(&ev, m)
		require.Equal(t, trace.MarkerEvent(m), ev, "%+v", m)
	}
}

// nodeMarkers are the node markers of name that Node writes.
func nodeMarkers(name string) []trace.Marker {
	return []trace.Marker{
		{Key: trace.MarkerNode, Name: name, Phase: trace.PhaseEnter},
		{Key: trace.MarkerNode, Name: name, Phase: trace.PhaseExit, Status: trace.NodeStatusOK},
		{Key: trace.MarkerNode, Name: name, Phase: trace.PhaseExit, Status: trace.NodeStatusFail, Error: "boom"},
	}
}

// checkIsNodeMarker checks isNodeMarker against trace.MarkerEvent: it
// takes a text for a marker only when that marker's text is that text,
// and takes an enter or ok exit marker's own text when its name needs no
// escaping.
func checkIsNodeMarker(t *testing.T, a, b string) {
	for _, ma := range nodeMarkers(a) {
		text := trace.MarkerEvent(ma).After.Canonical()
		for _, mb := range append(nodeMarkers(b), nodeMarkers(a)...) {
			if isNodeMarker(text, &mb) {
				require.Equal(t, trace.MarkerEvent(mb).After.Canonical(), text, "%+v taken for %+v", ma, mb)
			}
		}
		plain := a != "" && utf8.ValidString(a) && !strings.ContainsAny(a, "\"\\") && !strings.ContainsFunc(a, func(r rune) bool { return r < 0x20 })
		if plain && ma.Error == "" {
			require.True(t, isNodeMarker(text, &ma), "%+v", ma)
		}
	}
}

func TestIsNodeMarker(t *testing.T) {
	names := []string{"", "n0", "plan", "a b", "ünï", "<&>", "\x7f", "a\"b", "a\\b", "a\nb", "a\tb", "\x01", "\xff", "n0\",\"phase\":\"enter", "{", "n"}
	for _, a := range names {
		for _, b := range names {
			checkIsNodeMarker(t, a, b)
		}
	}
	// Not node markers.
	for _, m := range []trace.Marker{
		{Key: trace.MarkerRead, Name: "n0"},
		{Key: trace.MarkerNode, Name: "n0", Phase: trace.PhaseEnter, Forced: true},
		{Key: trace.MarkerNode, Name: "n0", Phase: trace.PhaseEnter, Kind: trace.KindDecision},
	} {
		text := trace.MarkerEvent(m).After.Canonical()
		require.False(t, isNodeMarker(text, &m), "%+v", m)
	}
}

func FuzzIsNodeMarker(f *testing.F) {
	for _, s := range [][2]string{{"n0", "n0"}, {"a\"b", "a\\\"b"}, {"ü", "\xc3"}, {"x", "x\x00"}, {"", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) { checkIsNodeMarker(t, a, b) })
}

// checkContentClean checks contentClean against a redaction pass: an
// event it takes for clean is kept as it is by the pass (or refused for a
// credential in a protected field, which keeps it as it is too), and one
// it does not holds something the pass changes once its protected fields
// hold nothing.
func checkContentClean(t *testing.T, ev trace.Event) {
	t.Helper()
	red, entries, err := trace.RedactEvent(ev)
	if contentClean(&ev) {
		require.Empty(t, entries, "%+v", ev)
		if err == nil {
			require.Equal(t, ev, red)
		}
		return
	}
	bare := ev
	bare.ID, bare.RunID, bare.ParentID, bare.InputHash, bare.OutputHash, bare.Redactions = "", "", "", "", "", nil
	_, entries, err = trace.RedactEvent(bare)
	require.NoError(t, err)
	require.NotEmpty(t, entries, "%+v: not clean, yet nothing to redact", ev)
}

func TestContentCleanAgreesWithRedaction(t *testing.T) {
	t.Parallel()
	const secret = "sk-proj-abcdefghijklmnop0123456789"
	payloads := []string{
		`null`, `{"v":1,"tag":"chain"}`, `"plain text"`, `"` + secret + `"`, `"glued` + secret + `word"`,
		`{"password":"hunter2"}`, `{"a":{"b":[{"c":{"api_key":"x"}}]}}`, `{"p\u0061ssword":"x"}`,
		`{"token":"[REDACTED]"}`, `["Bearer abcdefghijklmnopqrstuvwxyz012345"]`, `{"key":null}`,
		`{"name":"n1","phase":"enter"}`, `{"max_tokens":5,"the key":"to it"}`, `"ghp_abcdefghijklmnopqrstuvwxyz0123456789"`,
	}
	strs := []string{"", "search", "n0_result", "password", "api_key", "note " + secret, "Authorization", "[REDACTED]"}
	for _, p := range payloads {
		v := trace.MustParse(p)
		for _, s := range strs {
			for _, ev := range []trace.Event{
				{Type: trace.ToolCall, Name: s, Input: v},
				{Type: trace.ToolResult, Name: "t", Output: v, Message: s},
				{Type: trace.StateChange, Key: s, Before: trace.NullValue, After: v},
				{Type: trace.ErrorEvent, ErrorType: s, Message: "m", Details: v},
				{Type: trace.LLMRequest, Provider: s, Model: "m", Input: v},
				{Type: trace.ToolResult, Name: "t", Output: v, ID: secret, ParentID: "evt_1"},
				{Type: trace.StateChange, Key: "k", After: v, InputHash: secret, Redactions: []string{"/after"}},
			} {
				ev.RunID, ev.Status, ev.ReplayPolicy = "run_1", trace.StatusOK, trace.PolicyFrozen
				checkContentClean(t, ev)
			}
		}
	}
}

func FuzzContentClean(f *testing.F) {
	f.Add(`{"v":1}`, "search", "evt_1")
	f.Add(`{"a":["sk-proj-abcdefghijklmnop0123456789"]}`, "n", "")
	f.Add(`{"secret":1}`, "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789")
	f.Fuzz(func(t *testing.T, payload, name, id string) {
		v, err := trace.ParseValue([]byte(payload))
		if err != nil {
			return
		}
		for _, ev := range []trace.Event{
			{Type: trace.ToolResult, Name: name, Output: v, ID: id},
			{Type: trace.StateChange, Key: name, Before: v, After: v, ParentID: id},
			{Type: trace.ErrorEvent, Message: name, Details: v},
		} {
			checkContentClean(t, ev)
		}
	})
}

// TestStampedHashesAreThePayloads checks the hashes a session stamps,
// from the memory of the payloads it hashed last too, against the
// payloads' own: values passed on from call to call and state, repeated
// and alternating, short and null.
func TestStampedHashesAreThePayloads(t *testing.T) {
	t.Parallel()
	agentFrom := func(start int) Agent {
		return func(ctx context.Context, _ trace.Value) (any, error) {
			step := Tool("step", func(_ context.Context, in int) (int, error) { return in%3 + 1, nil })
			cur := start
			for i := range 40 {
				err := Node(ctx, fmt.Sprintf("n%d", i%5), func(ctx context.Context) error {
					out, err := step(ctx, cur)
					if err != nil {
						return err
					}
					cur = out
					if err := Set(ctx, "k", map[string]int{"value": cur}); err != nil {
						return err
					}
					return Set(ctx, fmt.Sprintf("k%d", i%7), []int{cur, i % 2})
				})
				if err != nil {
					return nil, err
				}
			}
			return cur, nil
		}
	}
	res, err := Record(context.Background(), "hashes", nil, agentFrom(0))
	require.NoError(t, err)
	check := func(tr *trace.Trace) {
		for _, ev := range tr.Events {
			in, out := ev.ExpectedHashes()
			require.Equal(t, in, ev.InputHash, "step %d (%s)", ev.Step, ev.Type)
			require.Equal(t, out, ev.OutputHash, "step %d (%s)", ev.Step, ev.Type)
		}
	}
	check(res.Trace)
	// The first replay of a loaded base hashes the base's events (one of
	// them recorded with wrong hashes), and keeps their right hashes.
	loaded := *res.Trace
	loaded.Events = append([]trace.Event(nil), res.Trace.Events...)
	loaded.Events[5].InputHash, loaded.Events[5].OutputHash = nullHash, nullHash
	same, err := Replay(context.Background(), &loaded, agentFrom(0))
	require.NoError(t, err)
	check(same.Trace)
	// A replay that parts from its base at once stamps every event.
	again, _ := Replay(context.Background(), res.Trace, agentFrom(1), Live("step"))
	require.NotEqual(t, res.Trace.Events[2].ID, again.Trace.Events[2].ID)
	check(again.Trace)
}
