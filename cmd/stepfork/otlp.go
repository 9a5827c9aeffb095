package main

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/stepfork/stepfork/trace"
)

// OTLP span kinds and status codes (opentelemetry-proto; enums are integers
// in OTLP JSON).
const (
	spanKindInternal = 1
	spanKindClient   = 3
	statusCodeError  = 2
)

// otlpBatch is how many spans one line holds at most, so that a huge run
// does not become one huge line.
const otlpBatch = 1000

// otlpSpan is one span before encoding.
type otlpSpan struct {
	id, parent string
	name       string
	kind       int
	start, end time.Time
	attrs      []otlpAttr
	events     []otlpEvent
	errType    string
	errMsg     string
	failed     bool
}

type otlpEvent struct {
	at    time.Time
	name  string
	attrs []otlpAttr
}

// otlpAttr is a key and an encoded AnyValue ({"stringValue": …}).
type otlpAttr struct {
	key string
	val []byte
}

func attrStr(k, v string) otlpAttr {
	return otlpAttr{k, newObject().str("stringValue", v).bytes()}
}

func attrInt(k string, v int64) otlpAttr {
	// 64-bit integers are decimal strings in OTLP JSON.
	return otlpAttr{k, newObject().str("intValue", strconv.FormatInt(v, 10)).bytes()}
}

func attrFloat(k string, v float64) otlpAttr {
	return otlpAttr{k, newObject().raw("doubleValue", strconv.AppendFloat(nil, v, 'g', -1, 64)).bytes()}
}

func attrStrings(k string, vs []string) otlpAttr {
	items := make([][]byte, len(vs))
	for i, v := range vs {
		items[i] = newObject().str("stringValue", v).bytes()
	}
	return otlpAttr{k, newObject().raw("arrayValue", newObject().raw("values", array(items)).bytes()).bytes()}
}

// attrJSON puts a redacted payload in a string attribute as compact JSON.
func attrJSON(k string, v trace.Value) otlpAttr {
	return attrStr(k, string(appendPyJSON(nil, redactValue(v))))
}

// otlpIDs derives trace and span ids from the run and event ids, so that
// exporting the same run twice gives the same ids.
type otlpIDs struct{ runID string }

func (ids otlpIDs) hash(kind, s string, n int) string {
	sum := sha256.Sum256([]byte("stepfork\x00" + kind + "\x00" + ids.runID + "\x00" + s))
	b := sum[:n]
	allZero := true
	for _, c := range b {
		allZero = allZero && c == 0
	}
	if allZero { // an all-zero id is invalid in OTLP
		b[n-1] = 1
	}
	return hex.EncodeToString(b)
}

func (ids otlpIDs) trace() string              { return ids.hash("trace", "", 16) }
func (ids otlpIDs) root() string               { return ids.hash("run", "", 8) }
func (ids otlpIDs) span(eventID string) string { return ids.hash("event", eventID, 8) }

// otlpLines maps a run to OTLP JSON lines following the OpenTelemetry GenAI
// semantic conventions: an invoke_agent root span, "chat {model}" spans for
// model calls, "execute_tool {tool}" spans for tool calls, parent links from
// parent_id, and the other events as span events on the span they belong to.
// Every line is one TracesData object ({"resourceSpans":[…]}).
func otlpLines(tr *trace.Trace, content bool) ([]byte, error) {
	ids := otlpIDs{tr.RunID}
	root := &otlpSpan{
		id: ids.root(), name: "invoke_agent " + redact(tr.AgentName), kind: spanKindInternal,
		start: tr.CreatedAt, end: tr.CreatedAt,
		attrs: []otlpAttr{
			attrStr("gen_ai.operation.name", "invoke_agent"),
			attrStr("gen_ai.agent.name", redact(tr.AgentName)),
			attrStr("stepfork.run_id", tr.RunID),
			attrStr("stepfork.run.status", string(tr.Status)),
			attrInt("stepfork.events", int64(len(tr.Events))),
		},
	}
	if tr.Failure != nil {
		root.failed, root.errType, root.errMsg = true, redact(tr.Failure.Type), redact(tr.Failure.Message)
		root.attrs = append(root.attrs, attrStr("error.type", root.errType))
	}
	if len(tr.Events) > 0 {
		root.start = tr.Events[0].Timestamp
	}
	spans := []*otlpSpan{root}
	owner := map[string]*otlpSpan{} // event id -> the span the event belongs to
	ownerOf := func(parentID string) *otlpSpan {
		if s, ok := owner[parentID]; ok && parentID != "" {
			return s
		}
		return root
	}
	for i := range tr.Events {
		ev := &tr.Events[i]
		if ev.Timestamp.After(root.end) {
			root.end = ev.Timestamp
		}
		if end := endOf(ev); end.After(root.end) {
			root.end = end
		}
		stepAttrs := []otlpAttr{attrInt("stepfork.step", int64(ev.Step)), attrStr("stepfork.event_id", ev.ID)}
		switch ev.Type {
		case trace.ToolCall, trace.LLMRequest:
			parent := ownerOf(ev.ParentID)
			s := &otlpSpan{id: ids.span(ev.ID), parent: parent.id, start: ev.Timestamp, end: endOf(ev)}
			if ev.Type == trace.ToolCall {
				s.name, s.kind = "execute_tool "+redact(ev.Name), spanKindInternal
				s.attrs = append(s.attrs,
					attrStr("gen_ai.operation.name", "execute_tool"),
					attrStr("gen_ai.tool.name", redact(ev.Name)),
					attrStr("gen_ai.tool.call.id", ev.ID),
					attrStr("gen_ai.tool.type", "function"))
				if content {
					s.attrs = append(s.attrs, attrJSON("gen_ai.tool.call.arguments", ev.Input))
				}
			} else {
				s.name, s.kind = "chat "+redact(ev.Model), spanKindClient
				s.attrs = append(s.attrs, attrStr("gen_ai.operation.name", "chat"))
				if ev.Provider != "" {
					s.attrs = append(s.attrs, attrStr("gen_ai.provider.name", redact(ev.Provider)))
				}
				s.attrs = append(s.attrs, attrStr("gen_ai.request.model", redact(ev.Model)))
				s.attrs = append(s.attrs, requestAttrs(ev.Input)...)
				if content {
					s.attrs = append(s.attrs, attrJSON("stepfork.llm.request", ev.Input))
				}
			}
			s.attrs = append(s.attrs, stepAttrs...)
			owner[ev.ID] = s
			spans = append(spans, s)
		case trace.ToolResult, trace.LLMResponse:
			s := ownerOf(ev.ParentID)
			owner[ev.ID] = s
			if s == root {
				root.events = append(root.events, otlpEvent{ev.Timestamp, "stepfork." + string(ev.Type), stepAttrs})
				continue
			}
			if end := endOf(ev); end.After(s.end) {
				s.end = end
			}
			if ev.Status == trace.StatusError {
				s.failed = true
			}
			if ev.Type == trace.ToolResult {
				if content {
					s.attrs = append(s.attrs, attrJSON("gen_ai.tool.call.result", ev.Output))
				}
				continue
			}
			if ev.Model != "" {
				s.attrs = append(s.attrs, attrStr("gen_ai.response.model", redact(ev.Model)))
			}
			if ev.PromptTokens != nil {
				s.attrs = append(s.attrs, attrInt("gen_ai.usage.input_tokens", *ev.PromptTokens))
			}
			if ev.CompletionTokens != nil {
				s.attrs = append(s.attrs, attrInt("gen_ai.usage.output_tokens", *ev.CompletionTokens))
			}
			if ev.CostUSD != nil {
				s.attrs = append(s.attrs, attrFloat("stepfork.cost_usd", *ev.CostUSD))
			}
			s.attrs = append(s.attrs, responseAttrs(ev.Output)...)
			if content {
				s.attrs = append(s.attrs, attrJSON("stepfork.llm.response", ev.Output))
			}
		case trace.ErrorEvent:
			s := ownerOf(ev.ParentID)
			owner[ev.ID] = s
			if s != root && s.errType == "" {
				s.failed, s.errType, s.errMsg = true, redact(ev.ErrorType), redact(ev.Message)
				s.attrs = append(s.attrs, attrStr("error.type", s.errType))
			}
			s.events = append(s.events, otlpEvent{ev.Timestamp, "exception", append([]otlpAttr{
				attrStr("exception.type", redact(ev.ErrorType)),
				attrStr("exception.message", redact(ev.Message)),
			}, stepAttrs...)})
		case trace.StateChange:
			s := ownerOf(ev.ParentID)
			owner[ev.ID] = s
			s.events = append(s.events, stateEvent(ev, stepAttrs, content))
		case trace.RunStart, trace.RunEnd:
			owner[ev.ID] = root
			if ev.Type == trace.RunEnd {
				root.attrs = append(root.attrs, attrStr("stepfork.run_end.status", string(ev.RunStatus)))
			}
		}
	}
	return encodeOTLP(tr, ids, spans), nil
}

// endOf is when an event ended: its timestamp plus its duration.
func endOf(ev *trace.Event) time.Time {
	if ev.DurationMS != nil {
		return ev.Timestamp.Add(time.Duration(*ev.DurationMS) * time.Millisecond)
	}
	return ev.Timestamp
}

// requestAttrs reads the usual request parameters from an OpenAI-shaped
// request (top level, or under "request" as Python stepfork's adapter
// records it).
func requestAttrs(in trace.Value) []otlpAttr {
	if r := in.Get("request"); r.Kind() == trace.Object {
		in = r
	}
	var out []otlpAttr
	if f, ok := in.Get("temperature").Float(); ok {
		out = append(out, attrFloat("gen_ai.request.temperature", f))
	}
	if f, ok := in.Get("top_p").Float(); ok {
		out = append(out, attrFloat("gen_ai.request.top_p", f))
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		if n, ok := in.Get(k).Int(); ok {
			out = append(out, attrInt("gen_ai.request.max_tokens", n))
			break
		}
	}
	return out
}

// responseAttrs reads the response id and finish reasons from an
// OpenAI-shaped response.
func responseAttrs(out trace.Value) []otlpAttr {
	var attrs []otlpAttr
	if id, ok := out.Get("id").Str(); ok {
		attrs = append(attrs, attrStr("gen_ai.response.id", redact(id)))
	}
	var reasons []string
	for _, c := range out.Get("choices").Elems() {
		if r, ok := c.Get("finish_reason").Str(); ok {
			reasons = append(reasons, redact(r))
		}
	}
	if len(reasons) > 0 {
		attrs = append(attrs, attrStrings("gen_ai.response.finish_reasons", reasons))
	}
	return attrs
}

// stateEvent is a state change or runtime marker as a span event: there is
// no GenAI convention for them, so they are namespaced stepfork.*.
func stateEvent(ev *trace.Event, stepAttrs []otlpAttr, content bool) otlpEvent {
	if m, ok := ev.Marker(); ok {
		name := "stepfork." + ev.Key[1:]
		attrs := []otlpAttr{}
		for _, kv := range [][2]string{{"name", m.Name}, {"phase", m.Phase}, {"status", m.Status}, {"kind", m.Kind}} {
			if kv[1] != "" {
				attrs = append(attrs, attrStr("stepfork."+kv[0], redact(kv[1])))
			}
		}
		if !m.Value.IsAbsent() {
			attrs = append(attrs, attrJSON("stepfork.value", m.Value))
		}
		if m.Forced {
			attrs = append(attrs, otlpAttr{"stepfork.forced", []byte(`{"boolValue":true}`)})
		}
		return otlpEvent{ev.Timestamp, name, append(attrs, stepAttrs...)}
	}
	attrs := []otlpAttr{attrStr("stepfork.key", redact(ev.Key))}
	if content {
		attrs = append(attrs, attrJSON("stepfork.before", ev.Before), attrJSON("stepfork.after", ev.After))
	}
	return otlpEvent{ev.Timestamp, "stepfork.state_change", append(attrs, stepAttrs...)}
}

func unixNano(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

func encodeAttrs(attrs []otlpAttr) []byte {
	items := make([][]byte, len(attrs))
	for i, a := range attrs {
		items[i] = newObject().str("key", a.key).raw("value", a.val).bytes()
	}
	return array(items)
}

func encodeOTLP(tr *trace.Trace, ids otlpIDs, spans []*otlpSpan) []byte {
	resource := newObject().raw("attributes", encodeAttrs([]otlpAttr{
		attrStr("service.name", redact(tr.AgentName)),
	})).bytes()
	scope := newObject().str("name", "github.com/stepfork/stepfork/cmd/stepfork").str("version", buildVersion()).bytes()
	var out []byte
	for start := 0; start < len(spans); start += otlpBatch {
		batch := spans[start:min(start+otlpBatch, len(spans))]
		items := make([][]byte, len(batch))
		for i, s := range batch {
			o := newObject().str("traceId", ids.trace()).str("spanId", s.id)
			if s.parent != "" {
				o.str("parentSpanId", s.parent)
			}
			end := s.end
			if end.Before(s.start) {
				end = s.start
			}
			o.str("name", s.name).int("kind", int64(s.kind)).
				str("startTimeUnixNano", unixNano(s.start)).
				str("endTimeUnixNano", unixNano(end)).
				raw("attributes", encodeAttrs(s.attrs))
			if len(s.events) > 0 {
				evs := make([][]byte, len(s.events))
				for j, ev := range s.events {
					evs[j] = newObject().str("timeUnixNano", unixNano(ev.at)).str("name", ev.name).raw("attributes", encodeAttrs(ev.attrs)).bytes()
				}
				o.raw("events", array(evs))
			}
			if s.failed {
				st := newObject().int("code", statusCodeError)
				if s.errMsg != "" {
					st.str("message", s.errMsg)
				}
				o.raw("status", st.bytes())
			}
			items[i] = o.bytes()
		}
		scopeSpans := newObject().raw("scope", scope).raw("spans", array(items)).bytes()
		rs := newObject().raw("resource", resource).raw("scopeSpans", array([][]byte{scopeSpans})).bytes()
		out = append(out, newObject().raw("resourceSpans", array([][]byte{rs})).bytes()...)
		out = append(out, '\n')
	}
	return out
}
