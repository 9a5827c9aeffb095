package fork

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

// FuzzParseInfo: fork.json is read from bundles that anyone may hand us.
// parseInfo never panics, and a record it accepts marshals to bytes that
// parse back to a record that marshals the same way.
func FuzzParseInfo(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "*.sftrace", infoFile))
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data, "")
		}
	}
	f.Add([]byte(`{"schema_version":1,"kind":"static","run_id":"run_b","parent_run_id":"run_a","parent_trace_path":null,`+
		`"fork_point":"step 1","fork_point_step":1,"fork_point_event_id":"evt_002","fork_timestamp":"2026-03-14T09:30:00Z",`+
		`"overrides_applied":0,"overrides":[]}`), "run_b")
	f.Add([]byte(`{"schema_version":1,"kind":"heal","run_id":"run_b","parent_run_id":"run_a","parent_trace_path":"a.sftrace",`+
		`"fork_point":"at the start","fork_point_step":0,"fork_point_event_id":"evt_001","fork_timestamp":"2026-03-14T09:30:00Z",`+
		`"overrides_applied":0,"overrides":[],"changes":[{"kind":"code_fields","target":"*","fields":["system"]}],"policy":"replay",`+
		`"memoize":true,"matchers":["ignore timestamps (model 'openai/gpt-4o')"]}`), "run_b")
	f.Fuzz(func(t *testing.T, data []byte, runID string) {
		info, err := parseInfo(data, runID)
		if err != nil {
			return
		}
		out, err := info.marshal()
		if err != nil {
			t.Fatalf("accepted record does not marshal: %v", err)
		}
		back, err := parseInfo(out, runID)
		if err != nil {
			t.Fatalf("marshalled record does not parse: %v\n%s", err, out)
		}
		again, err := back.marshal()
		if err != nil || string(again) != string(out) {
			t.Fatalf("fork.json is not a fixed point (%v):\n%s\n%s", err, out, again)
		}
	})
}

// FuzzParseChanges: the wire form of changes comes from fork.json. Parsing
// never panics, and parsed changes write back to the same wire form.
func FuzzParseChanges(f *testing.F) {
	seeds := []Change{
		ToolResult(OnStep(3), map[string]any{"ok": true}), LLMResponse(OnCall("gpt", 2), "text"),
		Prompt("write", "Be brief."), PromptAppend("write", " More."), PromptReplace("write", "a", "b"),
		Model("write", "gpt-4o"), Temperature("all", 0.2),
		State{Set: map[string]any{"a": 1}, Delete: []string{"b"}}, Decision("route", "b"), Param("n", 3),
		HumanResponse("approved", map[string]any{"note": "ok"}),
		CodeFields(All, "system", `messages[*]["content"]`), NewInTail(CodeFields("write", "a.b")),
	}
	for _, c := range seeds {
		v, _ := trace.ArrayValue(c.Wire())
		f.Add([]byte(v.Canonical()))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := trace.ParseValue(data)
		if err != nil {
			return
		}
		cs, err := parseChanges(v)
		if err != nil {
			return
		}
		w := wireChanges(cs)
		back, err := parseChanges(w)
		if err != nil {
			t.Fatalf("wire form of parsed changes does not parse: %v\n%s", err, w)
		}
		if w2 := wireChanges(back); w2 != w {
			t.Fatalf("wire form is not a fixed point:\n%s\n%s", w, w2)
		}
	})
}
