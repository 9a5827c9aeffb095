package replay_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

func TestMatchersNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		m              replay.Matcher
		recorded, live string
		want           bool
		wantBy         string
	}{
		{"ignore a field", replay.IgnoreFields("messages[0].content"),
			`{"messages":[{"content":"Now: 1","role":"system"},{"content":"hi","role":"user"}]}`,
			`{"messages":[{"content":"Now: 2","role":"system"},{"content":"hi","role":"user"}]}`, true, "ignore messages[0].content"},
		{"an ignored field does not hide another", replay.IgnoreFields("messages[0].content"),
			`{"messages":[{"content":"Now: 1"},{"content":"hi"}]}`, `{"messages":[{"content":"Now: 2"},{"content":"bye"}]}`, false, ""},
		{"RFC 3339 times", replay.IgnoreTimestamps(),
			`{"system":"It is 2026-03-14T09:30:00Z now."}`, `{"system":"It is 2027-01-02T03:04:05.123456+02:00 now."}`, true, "ignore timestamps"},
		{"Go times and dates", replay.IgnoreTimestamps(),
			`{"a":"at 2026-03-14 09:30:00 +0000 UTC","b":["2026-03-14"]}`, `{"a":"at 2027-11-30 23:59:59.999 +0100 CET","b":["2031-12-01"]}`, true, "ignore timestamps"},
		{"RFC 1123", replay.IgnoreTimestamps("headers.date"),
			`{"headers":{"date":"Sat, 14 Mar 2026 09:30:00 GMT"}}`, `{"headers":{"date":"Sun, 15 Mar 2026 10:00:00 GMT"}}`, true, "ignore timestamps in headers.date"},
		{"a number is not a time", replay.IgnoreTimestamps(), `{"n":"order 20260314"}`, `{"n":"order 20270101"}`, false, ""},
		{"sort a list", replay.SortList("ids"), `{"ids":["b","a","c"]}`, `{"ids":["c","b","a"]}`, true, "sort ids"},
		{"sorting does not hide a missing element", replay.SortList("ids"), `{"ids":["b","a"]}`, `{"ids":["a"]}`, false, ""},
		{"a function", replay.MatchFunc("same question", func(r, l trace.Value) bool { return r.Get("q") == l.Get("q") }),
			`{"q":"x","id":"req_1"}`, `{"q":"x","id":"req_2"}`, true, "same question"},
		{"narrowed to another tool", replay.IgnoreFields("id").Tool("other"), `{"id":1}`, `{"id":2}`, false, ""},
		{"narrowed to this tool", replay.IgnoreFields("id").Tool("search"), `{"id":1}`, `{"id":2}`, true, "ignore id (tool 'search')"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			by, ok := replay.Matched([]replay.Matcher{tt.m}, replay.KindTool, "search", "", "", trace.MustParse(tt.recorded), trace.MustParse(tt.live))
			if ok != tt.want || by != tt.wantBy {
				t.Errorf("Matched = %q, %v; want %q, %v", by, ok, tt.wantBy, tt.want)
			}
		})
	}
	// Models are named by label or model alone.
	m := replay.IgnoreTimestamps().Model("gpt-4o")
	if _, ok := replay.Matched([]replay.Matcher{m}, replay.KindLLM, "", "openai", "gpt-4o", trace.MustParse(`"2026-01-01"`), trace.MustParse(`"2027-01-01"`)); !ok {
		t.Error("Model(\"gpt-4o\") does not apply to openai/gpt-4o")
	}
	if got := m.String(); got != "ignore timestamps (model 'gpt-4o')" {
		t.Errorf("String() = %q", got)
	}
}

func TestMatchRefused(t *testing.T) {
	t.Parallel()
	rec, err := replay.Record(context.Background(), "echo", "hi", echoBuildAgent)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		m    replay.Matcher
		want string
	}{
		{replay.IgnoreFields("a..b"), "an empty member name"},
		{replay.IgnoreFields(), "no field is named"},
		{replay.MatchFunc("f", nil), "the function is nil"},
		{replay.Normalize("", func(v trace.Value) trace.Value { return v }), "a matcher has no name"},
		{replay.Matcher{}, "a matcher has no name"},
		{replay.SortList("x").Tool(""), "the tool name is empty"},
	} {
		_, err := replay.Replay(context.Background(), rec.Trace, echoBuildAgent, replay.Match(tt.m))
		if !errors.Is(err, replay.ErrInvalidOptions) || !strings.Contains(err.Error(), "replay.Match: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err %v, want ErrInvalidOptions with %q", tt.m, err, tt.want)
		}
	}
}

// clockAgent puts the current time in its prompt and in the input of tools
// it calls on goroutines, as agents do.
func clockAgent(now func() time.Time, calls *int) replay.Agent {
	model := func(_ context.Context, req replay.Request) (replay.Response, error) {
		*calls++
		return replay.Response{Content: "ok at " + req.System}, nil
	}
	audit := replay.Tool("audit", func(_ context.Context, in map[string]string) (string, error) { return "logged " + in["what"], nil })
	return func(ctx context.Context, in trace.Value) (any, error) {
		stamp := now().UTC().Format(time.RFC3339Nano)
		var wg sync.WaitGroup
		for _, what := range []string{"start", "lookup"} {
			wg.Go(func() { audit(ctx, map[string]string{"what": what, "at": stamp}) })
		}
		wg.Wait()
		resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "m", System: "You are helpful. Now: " + stamp,
			Messages: []replay.Message{{Role: "user", Content: "hi"}}}, model)
		return resp.Content, err
	}
}

// TestMatchTimeInPrompt: an agent that writes the current time into its
// prompt and tool inputs diverges on every replay; with a matcher that
// ignores timestamps it replays frozen, each call served says it matched
// through the matcher, and the agent sees the recorded answer.
func TestMatchTimeInPrompt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	calls := 0
	recorded := time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)
	rec, err := replay.Record(ctx, "clock", nil, clockAgent(func() time.Time { return recorded }, &calls))
	if err != nil {
		t.Fatal(err)
	}
	live := clockAgent(time.Now, &calls)
	if _, err := replay.Replay(ctx, rec.Trace, live); !errors.Is(err, replay.ErrDiverged) {
		t.Fatalf("replay without a matcher: %v, want a divergence", err)
	}
	res, err := replay.Replay(ctx, rec.Trace, live, replay.Match(replay.IgnoreTimestamps()))
	if err != nil {
		t.Fatalf("replay with the matcher: %v", err)
	}
	if calls != 1 || res.Served != 3 || res.Executed != 0 {
		t.Fatalf("%d live model calls, %d served, %d executed; want 1 (the recording), 3, 0", calls, res.Served, res.Executed)
	}
	for _, c := range res.Calls {
		if c.MatchedBy != "ignore timestamps" {
			t.Errorf("call #%d %s: matched by %q, want the matcher named", c.Position, c.Label, c.MatchedBy)
		}
	}
	if res.Output != "ok at You are helpful. Now: 2026-03-14T09:30:00Z" {
		t.Errorf("output %v, want the recorded answer", res.Output)
	}
	// A matcher narrowed to the model leaves the tools diverging.
	if _, err := replay.Replay(ctx, rec.Trace, live, replay.Match(replay.IgnoreTimestamps().Model("fake/m"))); !errors.Is(err, replay.ErrDiverged) || !strings.Contains(err.Error(), "audit") {
		t.Errorf("a model-only matcher: %v, want the audit tool to diverge", err)
	}
}
