package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/trace"
)

var inspectCmd = &command{
	name:    "inspect",
	args:    "PATH [--json] [--events] [--errors-only] [--step N]",
	summary: "show a run's manifest and event timeline",
	description: `
Inspect loads a trace bundle (without validating it), verifies its integrity
for display, and prints the manifest and the event timeline. Runtime markers
(named phases, decisions, parameters) are shown as what they are. A run
recorded by a Go agent says which code made it (Code: its module, version
and VCS revision, from the bundle's build.json; "build" in --json).

A node that exited with an error shows status error (its event, a state
change, is recorded ok). --errors-only keeps events with status error or type
error and the exits of nodes that failed; --step N keeps the
events at step N (no event there exits 1). --json prints stepfork's
TraceInspection object on one line. An unreadable trace exits 2.`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*env, []string) int {
		o := &inspectOptions{step: -1}
		fs.BoolVar(&o.json, "json", false, "print JSON")
		fs.BoolVar(&o.events, "events", false, "add a Details column with each event's payload")
		fs.BoolVar(&o.errorsOnly, "errors-only", false, "keep only events with status error or type error")
		fs.Func("step", "keep only the events at step `N`", func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return fmt.Errorf("want a step number ≥ 0")
			}
			o.step = n
			return nil
		})
		return func(e *env, args []string) int { return o.run(e, args[0]) }
	},
}

type inspectOptions struct {
	json, events, errorsOnly bool
	step                     int // -1: all
}

func (o *inspectOptions) run(e *env, path string) int {
	tr, integrity, err := trace.LoadVerified(path)
	if err != nil {
		if o.json {
			e.writeJSON(errorJSON("unreadable_trace", err.Error()))
		} else {
			e.println(e.paint(styleRed, "Unable to inspect trace."))
			e.println(clean(err.Error()))
		}
		return exitInput
	}

	var timeline []*trace.Event
	for i := range tr.Events {
		ev := &tr.Events[i]
		if o.errorsOnly && shownStatus(ev) != trace.StatusError && ev.Type != trace.ErrorEvent {
			continue
		}
		if o.step >= 0 && ev.Step != o.step {
			continue
		}
		timeline = append(timeline, ev)
	}
	if o.step >= 0 && len(timeline) == 0 {
		msg := fmt.Sprintf("No events found at step %d.", o.step)
		if o.json {
			e.writeJSON(errorJSON("missing_step", msg))
		} else {
			e.println(msg)
		}
		return exitDifferent
	}
	if o.json {
		e.writeJSON(inspectionJSON(tr, path, integrity.Status, timeline))
		return exitOK
	}
	o.human(e, tr, integrity.Status, timeline)
	return exitOK
}

// inspectionJSON is stepfork's TraceInspection, key for key, with a
// "marker" member added to the events that are runtime markers.
func inspectionJSON(tr *trace.Trace, path string, integrity trace.IntegrityStatus, timeline []*trace.Event) []byte {
	o := newObject().
		str("path", path).
		str("agent_name", redact(tr.AgentName)).
		str("run_id", tr.RunID).
		str("schema_version", trace.SchemaVersion).
		str("status", string(tr.Status)).
		str("created_at", isoformat(tr.CreatedAt)).
		int("events", int64(len(tr.Events))).
		int("llm_calls", int64(tr.Totals.LLMCalls)).
		int("tool_calls", int64(tr.Totals.ToolCalls)).
		optInt("duration_ms", tr.Totals.DurationMS)
	if tr.Failure != nil {
		o.raw("failure", failureJSON(tr.Failure))
	} else {
		o.null("failure")
	}
	o.str("integrity", string(integrity))
	if b, ok, err := tr.Build(); ok && err == nil {
		o.raw("build", buildJSON(b))
	}
	items := make([][]byte, len(timeline))
	for i, ev := range timeline {
		s := newObject().
			str("id", ev.ID).
			int("step", int64(ev.Step)).
			str("type", string(ev.Type)).
			str("label", redact(ev.Label())).
			str("status", string(ev.Status)).
			optStr("parent_id", ev.ParentID).
			optInt("duration_ms", ev.DurationMS).
			value("details", eventDetails(ev))
		if m, ok := ev.Marker(); ok {
			s.raw("marker", markerJSON(m))
		}
		items[i] = s.bytes()
	}
	o.raw("timeline", array(items))
	return o.bytes()
}

// failureJSON is the sanitized failure: keys sorted, as redaction rebuilds
// every dict in sorted order.
func failureJSON(f *trace.Failure) []byte {
	return newObject().str("message", redact(f.Message)).int("step", int64(f.Step)).str("type", redact(f.Type)).bytes()
}

// buildJSON is the build of the code that made the run, its texts
// redacted, with the members build.json has.
func buildJSON(b trace.Build) []byte {
	o := newObject().str("module", redact(b.Module))
	if b.Version != "" {
		o.str("version", redact(b.Version))
	}
	if b.Revision != "" {
		o.str("revision", b.Revision)
	}
	if !b.Time.IsZero() {
		o.str("time", b.Time.UTC().Format(time.RFC3339))
	}
	if b.Modified {
		o.bool("modified", true)
	}
	if b.Go != "" {
		o.str("go", redact(b.Go))
	}
	return o.bytes()
}

func markerJSON(m trace.Marker) []byte {
	o := newObject().str("key", m.Key)
	for _, kv := range [][2]string{{"name", m.Name}, {"phase", m.Phase}, {"status", m.Status}, {"error", m.Error}, {"kind", m.Kind}} {
		if kv[1] != "" {
			o.str(kv[0], redact(kv[1]))
		}
	}
	if !m.Value.IsAbsent() {
		o.value("value", redactValue(m.Value))
	}
	if m.Forced {
		o.bool("forced", true)
	}
	return o.bytes()
}

// eventDetails is the sanitized event dict minus the structural keys: the
// duration and the type's own fields, every field present (null when
// unset), keys sorted.
func eventDetails(ev *trace.Event) trace.Value {
	str := func(s string) trace.Value {
		if s == "" {
			return trace.NullValue
		}
		return trace.StringValue(s)
	}
	pay := func(v trace.Value) trace.Value {
		if v.IsAbsent() {
			return trace.NullValue
		}
		return v
	}
	intp := func(p *int64) trace.Value {
		if p == nil {
			return trace.NullValue
		}
		return trace.IntValue(*p)
	}
	ms := []trace.Member{{Key: "duration_ms", Value: intp(ev.DurationMS)}}
	add := func(k string, v trace.Value) { ms = append(ms, trace.Member{Key: k, Value: v}) }
	switch ev.Type {
	case trace.RunStart:
		add("input", pay(ev.Input))
	case trace.LLMRequest:
		add("provider", str(ev.Provider))
		add("model", str(ev.Model))
		add("input", pay(ev.Input))
	case trace.LLMResponse:
		add("model", str(ev.Model))
		add("output", pay(ev.Output))
		add("prompt_tokens", intp(ev.PromptTokens))
		add("completion_tokens", intp(ev.CompletionTokens))
		add("total_tokens", intp(ev.TotalTokens))
		cost := trace.NullValue
		if ev.CostUSD != nil {
			if v, err := trace.FloatValue(*ev.CostUSD); err == nil {
				cost = v
			}
		}
		add("cost_usd", cost)
	case trace.ToolCall:
		add("name", str(ev.Name))
		add("input", pay(ev.Input))
	case trace.ToolResult:
		add("name", str(ev.Name))
		add("output", pay(ev.Output))
	case trace.StateChange:
		add("key", str(ev.Key))
		add("before", pay(ev.Before))
		add("after", pay(ev.After))
	case trace.ErrorEvent:
		add("error_type", str(ev.ErrorType))
		add("message", str(ev.Message))
		add("details", pay(ev.Details))
	case trace.RunEnd:
		add("run_status", str(string(ev.RunStatus)))
		add("output", pay(ev.Output))
	}
	v, err := trace.ObjectValue(ms...)
	if err != nil {
		return trace.NullValue
	}
	return redactValue(v)
}

// isoformat prints t as Python's datetime.isoformat does for an aware
// datetime: "+00:00" rather than "Z", microseconds only when non-zero.
func isoformat(t time.Time) string {
	layout := "2006-01-02T15:04:05"
	if t.Nanosecond()/1000 != 0 {
		layout += ".000000"
	}
	return t.Format(layout + "-07:00")
}

func (o *inspectOptions) human(e *env, tr *trace.Trace, integrity trace.IntegrityStatus, timeline []*trace.Event) {
	e.println(e.paint(styleBold, "Stepfork Trace Inspector"))
	e.println("")
	type field struct{ k, v string }
	fields := []field{
		{"Agent:", clean(tr.AgentName)},
		{"Run:", clean(tr.RunID)},
		{"Status:", statusStyle(e, strings.ToUpper(string(tr.Status)))},
		{"Events:", strconv.Itoa(len(tr.Events))},
		{"Schema:", trace.SchemaVersion},
		{"Created:", isoformat(tr.CreatedAt)},
		{"LLM calls:", strconv.Itoa(tr.Totals.LLMCalls)},
		{"Tool calls:", strconv.Itoa(tr.Totals.ToolCalls)},
	}
	if d := tr.Totals.DurationMS; d != nil {
		fields = append(fields, field{"Duration:", fmt.Sprintf("%d ms", *d)})
	}
	fields = append(fields, field{"Integrity:", integrityStyle(e, integrity)})
	if b, ok, err := tr.Build(); err != nil {
		fields = append(fields, field{"Code:", clean("unreadable " + err.Error())})
	} else if ok {
		fields = append(fields, field{"Code:", clean(b.String())})
	}
	if tr.Failure != nil {
		fields = append(fields, field{"Failure:", clean(string(failureJSON(tr.Failure)))})
	}
	for _, f := range fields {
		e.printf("%-12s %s\n", f.k, f.v)
	}
	e.println("")
	e.println(e.paint(styleBold, "Event Timeline"))
	t := &table{header: []string{"Step", "Type", "Name/Model", "Status"}}
	if o.events {
		t.header = append(t.header, "Details")
	}
	for _, ev := range timeline {
		typ, name := string(ev.Type), clean(ev.Label())
		if m, ok := ev.Marker(); ok {
			typ, name = markerCells(m)
		}
		row := []string{strconv.Itoa(ev.Step), typ, name, string(shownStatus(ev))}
		if o.events {
			row = append(row, clean(preview(eventDetails(ev), 180)))
		}
		t.add(row...)
	}
	t.write(e)
}

// shownStatus is the status inspect shows for ev: the event's, except that
// the exit of a node that failed (a state_change recorded ok) is an error.
func shownStatus(ev *trace.Event) trace.Status {
	if m, ok := ev.Marker(); ok && m.Key == trace.MarkerNode && m.Phase == trace.PhaseExit && m.Status == trace.NodeStatusFail {
		return trace.StatusError
	}
	return ev.Status
}

// markerCells shows a runtime marker as what it is: "node ▶ write",
// "decision route = "refund"", "param max_results = 5".
func markerCells(m trace.Marker) (typ, name string) {
	kind := strings.TrimPrefix(m.Key, "@")
	val := func() string {
		if m.Value.IsAbsent() {
			return ""
		}
		s := preview(m.Value, 60)
		if m.Forced {
			s += " (forced)"
		}
		return s
	}
	switch m.Key {
	case trace.MarkerNode:
		switch m.Phase {
		case trace.PhaseEnter:
			return "node", "▶ " + clean(m.Name)
		case trace.PhaseExit:
			s := "◀ " + clean(m.Name)
			if m.Status == trace.NodeStatusFail {
				s += " (error: " + clean(clip.Head(m.Error, 60)) + ")"
			}
			return "node", s
		}
		return "node", clean(m.Name)
	case trace.MarkerDecision:
		if m.Kind == trace.KindApproval {
			kind = "approval"
		}
		return kind, clean(m.Name) + " = " + clean(val())
	case trace.MarkerParam, trace.MarkerEffect:
		return kind, clean(m.Name) + " = " + clean(val())
	}
	return kind, clean(val())
}

func statusStyle(e *env, s string) string {
	switch s {
	case "FAILED", "MISMATCH":
		return e.paint(styleRed, s)
	case "COMPLETED", "VERIFIED":
		return e.paint(styleGreen, s)
	}
	return e.paint(styleYellow, s)
}

func integrityStyle(e *env, s trace.IntegrityStatus) string {
	return statusStyle(e, strings.ToUpper(string(s)))
}
