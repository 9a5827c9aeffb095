package fork_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

// cityModel is a model behind replay.LLM that behaves like a hosted
// one: every answer has a fresh request id (in Extra, reported with
// replay.ReportIDs) and asks for a tool call with a fresh id, after a
// random delay, and reports more cached prompt tokens when cached says so.
// It answers "<prefix> <question>", and, to a conversation that carries
// tool results, "<prefix> summary: <the results>".
type cityModel struct {
	prefix atomic.Value // string
	cached atomic.Int64
	calls  atomic.Int64
}

func newCityModel() *cityModel {
	m := &cityModel{}
	m.prefix.Store("Answer:")
	return m
}

func (m *cityModel) call(ctx context.Context, req replay.Request) (replay.Response, error) {
	m.calls.Add(1)
	time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
	rid := fmt.Sprintf("req_%016x%016x", rand.Uint64(), rand.Uint64())
	replay.ReportIDs(ctx, "response", rid)
	resp := replay.Response{StopReason: "stop", Extra: map[string]any{"request_id": rid},
		Usage: replay.Usage{PromptTokens: 50, CompletionTokens: 5, TotalTokens: 55, CachedTokens: m.cached.Load()}}
	var results []string
	for _, msg := range req.Messages {
		if msg.Role == "tool" {
			results = append(results, msg.Content)
		}
	}
	last := req.Messages[len(req.Messages)-1].Content
	if len(results) == 0 {
		args, _ := json.Marshal(map[string]string{"q": last})
		resp.Content = m.prefix.Load().(string) + " " + last
		resp.ToolCalls = []replay.ToolCall{{ID: fmt.Sprintf("call_%016x", rand.Uint64()), Name: "lookup", Arguments: args}}
		return resp, nil
	}
	resp.Content = m.prefix.Load().(string) + " summary: " + strings.Join(results, "; ")
	return resp, nil
}

// agent asks the model about two cities at once, each on its goroutine,
// runs the tool each answer asks for on that goroutine, then asks once
// more with both answers and both tool results (which name the tool calls
// by the ids the model minted).
func (m *cityModel) agent() replay.Agent {
	lookup := replay.Tool("lookup", func(_ context.Context, in map[string]string) (string, error) {
		time.Sleep(time.Duration(rand.IntN(2)) * time.Millisecond)
		return "sunny in " + in["q"], nil
	})
	ask := func(ctx context.Context, msgs []replay.Message) (replay.Response, error) {
		return replay.LLM(ctx, replay.Request{Provider: "acme", Model: "m-1", System: "Be terse.", Messages: msgs}, m.call)
	}
	return replay.Typed(func(ctx context.Context, _ string) (string, error) {
		cities := []string{"Pokhara", "Kathmandu"}
		turns := make([][]replay.Message, len(cities))
		errs := make([]error, len(cities))
		var wg sync.WaitGroup
		for i, c := range cities {
			wg.Go(func() {
				resp, err := ask(ctx, []replay.Message{{Role: "user", Content: c}})
				if err != nil {
					errs[i] = err
					return
				}
				tc := resp.ToolCalls[0]
				var in map[string]string
				if err := json.Unmarshal(tc.Arguments, &in); err != nil {
					errs[i] = err
					return
				}
				out, err := lookup(ctx, in)
				errs[i] = err
				turns[i] = []replay.Message{{Role: "assistant", Content: resp.Content, ToolCalls: resp.ToolCalls},
					{Role: "tool", ToolCallID: tc.ID, Content: out}}
			})
		}
		wg.Wait()
		msgs := []replay.Message{{Role: "user", Content: "Both cities?"}}
		for i := range cities {
			if errs[i] != nil {
				return "", errs[i]
			}
			msgs = append(msgs, turns[i]...)
		}
		resp, err := ask(ctx, msgs)
		return resp.Content, err
	})
}

var eventID = regexp.MustCompile(`evt_[0-9a-f]{32}`)

// TestConcurrentModelCallsLiveTail: two model calls on goroutines, each
// answer minting fresh ids, then a call that sees both answers and the
// tool results naming the ids. A live tail whose model says the same with
// other ids, another schedule and more of its prompt cached is equivalent;
// one whose answers all changed shows each concurrent call's output as
// changed, paired with the call of its own input (never a change of input
// that did not happen); one whose prompt changed shows only the prompt,
// whichever goroutine reached the model first (the ids of each live call
// are bound to those of the recorded call it stands for, not to those of
// the call that happened to arrive first in the base). The golden and the
// Explain (but for its event ids) of the same fork are one text across
// re-recordings.
func TestConcurrentModelCallsLiveTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	renders, explains := map[string]bool{}, map[string]bool{}
	for i := range 10 {
		m := newCityModel()
		rec, err := replay.Record(ctx, "cities", "", m.agent())
		require.NoError(t, err)
		require.NoError(t, rec.Err)
		require.Len(t, trace.MintedIDs(rec.Trace), 5, "three request ids and two tool-call ids")

		m.cached.Store(16)
		v, err := fork.Run(ctx, rec.Trace, fork.Start(), m.agent())
		require.NoError(t, err)
		require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
		assert.Equal(t, 3, v.LiveModelCalls)
		assert.True(t, v.Diff.Equivalent(), "run %d, same answers: %v", i, changedPaths(v.Diff))

		v, err = fork.Run(ctx, rec.Trace, fork.Start(), m.agent(), fork.Prompt(fork.All, "Be very terse."))
		require.NoError(t, err)
		require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
		assert.Equal(t, []string{"llm input.system", "llm input.system", "llm input.system"}, changedPaths(v.Diff),
			"run %d, another prompt", i)

		m.prefix.Store("Reply:")
		v, err = fork.Run(ctx, rec.Trace, fork.Start(), m.agent())
		require.NoError(t, err)
		require.Equal(t, fork.StatusCompleted, v.Status, "%v", v.Err)
		assert.Equal(t, []string{"llm output.content", "llm output.content",
			"llm input.messages[1].content", "llm input.messages[3].content", "llm output.content", "run output"},
			changedPaths(v.Diff), "run %d, other answers", i)
		text, err := sftest.Render(v)
		require.NoError(t, err)
		// Explain names the events by id, which differ between
		// recordings; the rest must not.
		renders[text], explains[eventID.ReplaceAllString(v.Diff.Explain(), "evt_…")] = true, true
	}
	assert.Len(t, renders, 1, "one rendering of the same fork of ten recordings:\n%s", strings.Join(slices.Collect(maps.Keys(renders)), "\n----\n"))
	assert.Len(t, explains, 1, "one Explain of the same fork of ten recordings:\n%s", strings.Join(slices.Collect(maps.Keys(explains)), "\n----\n"))
}
