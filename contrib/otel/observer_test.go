package otel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	sfotel "github.com/stepfork/stepfork/contrib/otel"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
)

// fakeOpenAI answers chat completions as the real API does (fresh ids,
// usage); the answer says "book" unless the system prompt says "wait".
func fakeOpenAI(t *testing.T, requests *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		var req struct {
			Model    string `json:"model"`
			Messages []struct{ Role, Content string }
		}
		json.NewDecoder(r.Body).Decode(&req)
		answer := "book"
		if strings.Contains(req.Messages[0].Content, "wait") {
			answer = "wait"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-%x","object":"chat.completion","created":%d,"model":%q,
			"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`, rand.Uint64(), rand.Int32(), req.Model, answer)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func tripAgent(url string) replay.Agent {
	weather := replay.Tool("get_weather", func(ctx context.Context, city string) (string, error) { return "sunny in " + city, nil })
	book := replay.Tool("book_trip", func(ctx context.Context, plan string) (string, error) { return "booked: " + plan, nil })
	client := &http.Client{Transport: replay.Transport(nil)}
	return replay.Typed(func(ctx context.Context, city string) (string, error) {
		w, err := weather(ctx, city)
		if err != nil {
			return "", err
		}
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": []map[string]string{
			{"role": "system", "content": "You plan trips."}, {"role": "user", "content": w}}})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var out struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.Unmarshal(raw, &out); err != nil || len(out.Choices) == 0 {
			return "", fmt.Errorf("bad answer %s", raw)
		}
		return book(ctx, out.Choices[0].Message.Content+" "+city)
	})
}

func attrs(kv []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, a := range kv {
		m[string(a.Key)] = a.Value.Emit()
	}
	return m
}

func TestForkSpansMetricsAndLog(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := fakeOpenAI(t, &requests)
	agent := tripAgent(srv.URL)

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var logs bytes.Buffer
	obs, err := sfotel.New(sfotel.WithTracerProvider(tp), sfotel.WithMeterProvider(mp),
		sfotel.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	rec, err := replay.Record(obs.Context(ctx), "trip", "Pokhara", agent)
	if err != nil {
		t.Fatal(err)
	}
	primary := spans.GetSpans()
	if names := spanNames(primary); names != "execute_tool get_weather,chat gpt-4o-mini,execute_tool book_trip,invoke_agent trip" {
		t.Errorf("recording spans %s", names)
	}
	for _, s := range primary {
		if k := attrs(s.Attributes)["stepfork.run.kind"]; k != sfotel.KindPrimary {
			t.Errorf("recording span %q has run kind %q, want primary", s.Name, k)
		}
	}
	spans.Reset()

	// The fork: the prompt says "wait", the model answers differently, and
	// the tail books another plan (allowed), so it runs a model call and a
	// tool call live; get_weather is served from the recording.
	const prompt = "You plan trips; wait for rain to stop."
	v, err := obs.Fork(ctx, rec.Trace, fork.BeforeCall(replay.KindLLM, "openai/gpt-4o-mini", 1), agent,
		fork.Prompt(fork.All, prompt), fork.Allow("book_trip"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Output != "booked: wait Pokhara" {
		t.Fatalf("fork output %v", v.Output)
	}
	got := spans.GetSpans()
	var forkSpans []tracetest.SpanStub
	byID := map[string]tracetest.SpanStub{}
	for _, s := range got {
		byID[s.SpanContext.SpanID().String()] = s
		if strings.HasPrefix(s.Name, "fork ") {
			forkSpans = append(forkSpans, s)
		}
	}
	if len(forkSpans) != 1 {
		t.Fatalf("%d fork spans among %s, want 1", len(forkSpans), spanNames(got))
	}
	fs := forkSpans[0]
	fa := attrs(fs.Attributes)
	for k, want := range map[string]string{
		"stepfork.fork.run_id":            v.Trace.RunID,
		"stepfork.fork.base_run_id":       rec.Trace.RunID,
		"stepfork.fork.point":             `BeforeCall(llm, "openai/gpt-4o-mini", 1)`,
		"stepfork.fork.point_description": v.At.Description,
		"stepfork.fork.point_step":        fmt.Sprint(v.At.Step),
		"stepfork.fork.status":            "completed",
		"stepfork.run.kind":               sfotel.KindCounterfactual,
	} {
		if fa[k] != want {
			t.Errorf("fork span %s = %q, want %q", k, fa[k], want)
		}
	}
	if !strings.Contains(fa["stepfork.fork.changes"], prompt) {
		t.Errorf("fork span changes %q do not name the prompt", fa["stepfork.fork.changes"])
	}
	// The tail's GenAI spans nest under the fork span; nothing served has a span.
	under := func(s tracetest.SpanStub) bool {
		for p := s.Parent; p.IsValid(); p = byID[p.SpanID().String()].Parent {
			if p.SpanID() == fs.SpanContext.SpanID() {
				return true
			}
		}
		return false
	}
	var tail []string
	for _, s := range got {
		if s.Name == fs.Name {
			continue
		}
		if !under(s) {
			t.Errorf("span %q is not under the fork span", s.Name)
		}
		a := attrs(s.Attributes)
		if a["stepfork.run.kind"] != sfotel.KindCounterfactual {
			t.Errorf("span %q has run kind %q", s.Name, a["stepfork.run.kind"])
		}
		tail = append(tail, s.Name)
		if s.Name == "chat gpt-4o-mini" {
			for k, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
				"gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "5"} {
				if a[k] != want {
					t.Errorf("chat span %s = %q, want %q", k, a[k], want)
				}
			}
		}
		if s.Name == "execute_tool book_trip" && a["gen_ai.tool.name"] != "book_trip" {
			t.Errorf("execute_tool span attributes %v", a)
		}
	}
	if strings.Join(tail, ",") != "chat gpt-4o-mini,execute_tool book_trip,invoke_agent trip" {
		t.Errorf("spans under the fork: %v, want the tail's chat and execute_tool in invoke_agent", tail)
	}

	// Metrics: the counterfactual run kind on the fork's calls and tokens.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					kind, _ := dp.Attributes.Value("stepfork.run.kind")
					outcome, _ := dp.Attributes.Value("stepfork.call.outcome")
					sums[m.Name+"/"+kind.Emit()+"/"+outcome.Emit()] += dp.Value
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					kind, _ := dp.Attributes.Value("stepfork.run.kind")
					typ, _ := dp.Attributes.Value("gen_ai.token.type")
					sums[m.Name+"/"+kind.Emit()+"/"+typ.Emit()] += dp.Sum
				}
			}
		}
	}
	for k, want := range map[string]int64{
		"stepfork.runs/primary/":                         1,
		"stepfork.runs/counterfactual/":                  1,
		"stepfork.calls/primary/executed":                3,
		"stepfork.calls/counterfactual/served":           1,
		"stepfork.calls/counterfactual/executed":         2,
		"gen_ai.client.token.usage/counterfactual/input": 12,
		"gen_ai.client.token.usage/primary/output":       5,
	} {
		if sums[k] != want {
			t.Errorf("metric %s = %d, want %d (all: %v)", k, sums[k], want, sums)
		}
	}

	// The log line at the fork's start.
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "stepfork fork started" {
			line = m
		}
	}
	if line == nil || line["run_id"] != v.Trace.RunID || line["base_run_id"] != rec.Trace.RunID ||
		line["trace_id"] != fs.SpanContext.TraceID().String() || !strings.Contains(fmt.Sprint(line["changes"]), prompt) {
		t.Errorf("fork start line %v in log:\n%s", line, logs.String())
	}
}

func spanNames(spans tracetest.SpanStubs) string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

// A secret in a failing tool's error never reaches a span.
func TestErrorsRedacted(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	obs, err := sfotel.New(sfotel.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))),
		sfotel.WithMeterProvider(sdkmetric.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	leak := replay.Tool("deploy", func(ctx context.Context, _ string) (string, error) {
		return "", fmt.Errorf("auth failed for token ghp_abcdefghijklmnopqrstuvwxyz0123456789")
	})
	agent := replay.Typed(func(ctx context.Context, in string) (string, error) { return leak(ctx, in) })
	replay.Record(obs.Context(context.Background()), "deploy", "x", agent)
	for _, s := range spans.GetSpans() {
		if strings.Contains(s.Status.Description, "ghp_") || strings.Contains(fmt.Sprint(s.Attributes), "ghp_") {
			t.Errorf("span %q carries the secret: %q", s.Name, s.Status.Description)
		}
	}
}

// A frozen replay is traced as kind replay: its run span and nothing else,
// since no call executes, and its calls are counted as served.
func TestFrozenReplayIsReplayKind(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := fakeOpenAI(t, &requests)
	agent := tripAgent(srv.URL)
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	obs, err := sfotel.New(sfotel.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))),
		sfotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := replay.Record(context.Background(), "trip", "Pokhara", agent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Replay(obs.Context(context.Background()), rec.Trace, agent); err != nil {
		t.Fatal(err)
	}
	got := spans.GetSpans()
	if len(got) != 1 || got[0].Name != "invoke_agent trip" || attrs(got[0].Attributes)["stepfork.run.kind"] != sfotel.KindReplay ||
		attrs(got[0].Attributes)["stepfork.base_run.id"] != rec.Trace.RunID {
		t.Errorf("frozen replay spans %s %v", spanNames(got), got)
	}
	if requests.Load() != 1 {
		t.Errorf("%d requests, want the recording's 1", requests.Load())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	served := int64(0)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "stepfork.calls" {
				for _, dp := range s.DataPoints {
					if o, _ := dp.Attributes.Value("stepfork.call.outcome"); o.Emit() == "served" {
						served += dp.Value
					}
				}
			}
		}
	}
	if served != 3 {
		t.Errorf("%d served calls counted, want 3", served)
	}
}
