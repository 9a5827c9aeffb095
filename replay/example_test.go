package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// printEvents prints the events of a trace, one a line, indented under
// their parents.
func printEvents(tr *trace.Trace) {
	depth := map[string]int{}
	for _, ev := range tr.Events {
		d := 0
		if ev.ParentID != "" {
			d = depth[ev.ParentID] + 1
		}
		depth[ev.ID] = d
		fmt.Printf("%d %s%s %s\n", ev.Step, strings.Repeat("  ", d), ev.Type, ev.Label())
	}
}

// A tool is wrapped once, where it is defined, and called as before. While
// recording, each call is a tool_call and a tool_result; with no session in
// the context, the wrapper is the function itself.
func ExampleTool() {
	weather := replay.Tool("weather", func(ctx context.Context, city string) (string, error) {
		return "sunny in " + city, nil
	})
	agent := replay.Typed(func(ctx context.Context, city string) (string, error) {
		return weather(ctx, city)
	})

	rec, err := replay.Record(context.Background(), "forecaster", "Lisbon", agent)
	if err != nil {
		log.Fatal(err)
	}
	printEvents(rec.Trace)
	fmt.Println(rec.Output)

	// Without a session, the wrapped tool runs as it is.
	out, _ := weather(context.Background(), "Porto")
	fmt.Println(out)
	// Output:
	// 0 run_start run_start
	// 1   tool_call weather
	// 2     tool_result weather
	// 3 run_end completed
	// sunny in Lisbon
	// sunny in Porto
}

// A model call goes through LLM with a provider-neutral request; the call
// function is whatever client the agent uses. On replay the recorded
// response is served and the client is not called.
func ExampleLLM() {
	var calls int
	client := func(ctx context.Context, req replay.Request) (replay.Response, error) {
		calls++
		return replay.Response{Content: "Bonjour", Usage: replay.Usage{PromptTokens: 12, CompletionTokens: 3}}, nil
	}
	agent := replay.Typed(func(ctx context.Context, text string) (string, error) {
		resp, err := replay.LLM(ctx, replay.Request{Provider: "openai", Model: "gpt-4o-mini",
			System:   "Translate into French.",
			Messages: []replay.Message{{Role: "user", Content: text}}}, client)
		return resp.Content, err
	})

	rec, err := replay.Record(context.Background(), "translator", "Hello", agent)
	if err != nil {
		log.Fatal(err)
	}
	req, resp := rec.Trace.Events[1], rec.Trace.Events[2]
	fmt.Println(req.Type, req.Label(), req.Input)
	fmt.Println(resp.Type, resp.Output, *resp.PromptTokens, *resp.CompletionTokens)

	res, err := replay.Replay(context.Background(), rec.Trace, agent)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Output, "- client calls:", calls)
	// Output:
	// llm_request gpt-4o-mini {"messages":[{"content":"Hello","role":"user"}],"system":"Translate into French."}
	// llm_response {"content":"Bonjour","usage":{"completion_tokens":3,"prompt_tokens":12}} 12 3
	// Bonjour - client calls: 1
}

// An agent built on a model SDK is recorded by giving the SDK an
// http.Client whose transport is replay.Transport. Here an httptest server
// stands for the model API, and the "SDK" is a plain POST of an OpenAI chat
// completion. The frozen replay answers from the recording: the server is
// not contacted again.
func ExampleTransport() {
	var hits atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"42"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`)
	}))
	defer api.Close()

	client := &http.Client{Transport: replay.Transport(nil)}
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		body := `{"model":"gpt-4o","messages":[{"role":"user","content":"What is six times seven?"}]}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, api.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer sk-not-recorded")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return len(b) > 0 && bytes.Contains(b, []byte(`"content":"42"`)), err
	}

	rec, err := replay.Record(context.Background(), "calculator", nil, agent)
	if err != nil || rec.Err != nil {
		log.Fatal(err, rec.Err)
	}
	call, answer := rec.Trace.Events[1], rec.Trace.Events[2]
	fmt.Println(call.Type, call.Provider, call.Model, *answer.TotalTokens, "tokens")
	fmt.Println("status", answer.Output.Get("status"), answer.Output.Get("headers").Get("content-type"))
	fmt.Println("API key in the trace:", strings.Contains(call.Input.Canonical()+answer.Output.Canonical(), "sk-not-recorded"))

	res, err := replay.Replay(context.Background(), rec.Trace, agent)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replayed:", res.Output, "- requests the server got:", hits.Load())
	// Output:
	// llm_request openai gpt-4o 10 tokens
	// status 200 "application/json"
	// API key in the trace: false
	// replayed: true - requests the server got: 1
}

// Prices gives the transport the price of each model once; every live
// call of a priced model records its cost from the tokens of its response
// (cached input tokens at their own price). The message the response says is
// recorded next to it: what a diff compares.
func ExamplePrices() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-9f2","created":1767225600,"model":"gpt-4o-mini","system_fingerprint":"fp_3a",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"42"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":2000,"completion_tokens":100,"total_tokens":2100,"prompt_tokens_details":{"cached_tokens":1000}}}`)
	}))
	defer api.Close()

	client := &http.Client{Transport: replay.Transport(nil, replay.Prices{
		"gpt-4o-mini": {Input: 0.15, CachedInput: 0.075, Output: 0.60},
	})}
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"What is six times seven?"}]}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, api.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		return nil, resp.Body.Close()
	}
	rec, err := replay.Record(context.Background(), "calculator", nil, agent)
	if err != nil || rec.Err != nil {
		log.Fatal(err, rec.Err)
	}
	answer := rec.Trace.Events[2]
	fmt.Printf("cost: $%.6f\n", *answer.CostUSD)
	fmt.Println("message:", answer.Output.Get("message"))
	// Output:
	// cost: $0.000285
	// message: {"content":"42","finish_reason":"stop","usage":{"cached_tokens":1000,"completion_tokens":100,"prompt_tokens":2000,"total_tokens":2100}}
}

// A node is a named phase of the agent: its events hang under its enter
// marker, and forks address its boundaries.
func ExampleNode() {
	lookup := replay.Tool("lookup_order", func(ctx context.Context, id string) (string, error) {
		return "shipped", nil
	})
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		var status string
		err := replay.Node(ctx, "triage", func(ctx context.Context) error {
			var err error
			status, err = lookup(ctx, "o_1")
			return err
		})
		return status, err
	}

	rec, err := replay.Record(context.Background(), "desk", nil, agent)
	if err != nil {
		log.Fatal(err)
	}
	printEvents(rec.Trace)
	exit, _ := rec.Trace.Events[4].Marker()
	fmt.Println(exit.Name, exit.Phase, exit.Status)
	// Output:
	// 0 run_start run_start
	// 1   state_change @node
	// 2     tool_call lookup_order
	// 3       tool_result lookup_order
	// 4     state_change @node
	// 5 run_end completed
	// triage exit ok
}

// Record runs the agent for real and returns its run. Its error says whether
// the recording failed; the agent's own error is in the result, and a failed
// run is recorded like any other.
func ExampleRecord() {
	dir, err := os.MkdirTemp("", "replay-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	pay := replay.Tool("pay", func(ctx context.Context, amount int) (string, error) {
		return "", errors.New("card declined")
	})
	agent := replay.Typed(func(ctx context.Context, amount int) (string, error) {
		return pay(ctx, amount)
	})

	rec, err := replay.Record(context.Background(), "checkout", 30, agent,
		replay.SaveTo(filepath.Join(dir, "checkout.sftrace")))
	if err != nil {
		log.Fatal(err) // options, an input that is not JSON, a failed save
	}
	fmt.Println("agent error:", rec.Err)
	fmt.Println("status:", rec.Trace.Status, "failure:", rec.Trace.Failure.Message)
	fmt.Println("saved:", filepath.Base(rec.Path))

	tr, err := trace.Load(rec.Path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("loaded:", len(tr.Events), "events")
	// Output:
	// agent error: card declined
	// status: failed failure: card declined
	// saved: checkout.sftrace
	// loaded: 6 events
}

// Replay serves a recorded run back to the agent: the recorded input is
// handed to it, every call is answered from the recording, and nothing
// executes. A change in what the agent asks for is a divergence.
func ExampleReplay() {
	var executed int
	quote := replay.Tool("quote", func(ctx context.Context, item string) (int, error) {
		executed++
		return 120, nil
	})
	agent := func(item string) replay.Agent {
		return func(ctx context.Context, _ trace.Value) (any, error) { return quote(ctx, item) }
	}

	rec, err := replay.Record(context.Background(), "quoter", nil, agent("chair"))
	if err != nil {
		log.Fatal(err)
	}

	res, err := replay.Replay(context.Background(), rec.Trace, agent("chair"))
	fmt.Println(res.Output, err, "served:", res.Served, "executed now:", executed-1)

	_, err = replay.Replay(context.Background(), rec.Trace, agent("table"))
	fmt.Println(errors.Is(err, replay.ErrDiverged))
	fmt.Println(strings.SplitN(err.Error(), "\n", 2)[0])
	// Output:
	// 120 <nil> served: 1 executed now: 0
	// true
	// call #1: tool 'quote' input diverged from the recording
}

// A trace replayed many times (the variants of a sweep, a table of agent
// versions) is prepared once; the Prepared is read-only and may be shared
// by concurrent replays.
func ExamplePrepared_Replay() {
	double := replay.Tool("double", func(ctx context.Context, n int) (int, error) { return 2 * n, nil })
	agent := replay.Typed(func(ctx context.Context, n int) (int, error) { return double(ctx, n) })

	rec, err := replay.Record(context.Background(), "doubler", 21, agent)
	if err != nil {
		log.Fatal(err)
	}

	p := replay.Prepare(rec.Trace)
	for range 3 {
		res, err := p.Replay(context.Background(), agent)
		fmt.Println(res.Output, res.Served, err)
	}
	// Output:
	// 42 1 <nil>
	// 42 1 <nil>
	// 42 1 <nil>
}

// A binary built without build information (Bazel, -buildvcs=false) says
// which code made its runs with replay.Build, from a version stamped
// otherwise.
func ExampleBuild() {
	version := "46b7ad0c4abd65b7e0efec1149cdb0d7ddcb7ecd" // set with -ldflags -X, say
	agent := func(_ context.Context, in trace.Value) (any, error) { return in, nil }
	res, err := replay.Record(context.Background(), "echo", "hi", agent,
		replay.Build(trace.Build{Module: "example.com/support", Version: "v1.4.0", Revision: version}))
	if err != nil {
		log.Fatal(err)
	}
	b, _, _ := res.Trace.Build()
	fmt.Println(b)
	// Output:
	// example.com/support v1.4.0, revision 46b7ad0c4abd
}

// An adapter on LLMRaw reports the ids its provider minted. A replay whose
// model call runs live gets fresh ids from the provider; the run records
// the recorded ones in their place, and the next request, which carries
// the live tool-call id back, is matched as the recorded one.
func ExampleReportIDs() {
	var n atomic.Int32
	provider := func(body trace.Value) trace.Value { // mints fresh ids on every call
		i := n.Add(1)
		if strings.Contains(body.Canonical(), "tool_call_id") {
			return trace.MustValueOf(map[string]any{"id": fmt.Sprintf("resp_%04d", i), "content": "sunny"})
		}
		return trace.MustValueOf(map[string]any{"id": fmt.Sprintf("resp_%04d", i),
			"tool_calls": []any{map[string]any{"id": fmt.Sprintf("call_%04d", i), "name": "weather"}}})
	}
	chat := func(ctx context.Context, messages []any) (trace.Value, error) {
		body := trace.MustValueOf(map[string]any{"messages": messages})
		return replay.LLMRaw(ctx, "acme", "m-1", body, func(ctx context.Context, body trace.Value) (trace.Value, error) {
			out := provider(body)
			id, _ := out.Get("id").Str()
			replay.ReportIDs(ctx, "response", id)
			for _, tc := range out.Get("tool_calls").Elems() {
				callID, _ := tc.Get("id").Str()
				replay.ReportIDs(ctx, "call", callID)
			}
			return out, nil
		})
	}
	agent := func(ctx context.Context, _ trace.Value) (any, error) {
		first, err := chat(ctx, []any{"weather?"})
		if err != nil {
			return nil, err
		}
		var callID string // the live id: the agent sends it back
		for _, tc := range first.Get("tool_calls").Elems() {
			callID, _ = tc.Get("id").Str()
		}
		second, err := chat(ctx, []any{"weather?", map[string]any{"tool_call_id": callID, "content": "21C"}})
		if err != nil {
			return nil, err
		}
		return second.Get("content").Any(), nil
	}
	ctx := context.Background()
	rec, _ := replay.Record(ctx, "weather", nil, agent)
	res, err := replay.Replay(ctx, rec.Trace, agent, replay.Live()) // the model runs again, minting new ids
	fmt.Println("replayed:", err == nil, res.Output)
	for _, ev := range res.Trace.Events {
		if ev.Type == trace.LLMRequest {
			fmt.Println("request:", ev.Input)
		}
	}
	// Output:
	// replayed: true sunny
	// request: {"messages":["weather?"]}
	// request: {"messages":["weather?",{"content":"21C","tool_call_id":"call_0001"}]}
}
