package assert_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/trace"
)

// TestParseExpectationsShapeErrors checks stepfork's shape errors literally,
// including the malformed inputs of its test_assertions.py.
func TestParseExpectationsShapeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ json, want string }{
		{`[]`, "trajectory expectation must be a JSON object"},
		{`"called"`, "trajectory expectation must be a JSON object"},
		{`{"__import__": "os"}`, "unknown trajectory expectation key(s): ['__import__']"},
		{`{"called": ["a"], "eval": 1, "exec": 2}`, "unknown trajectory expectation key(s): ['eval', 'exec']"},
		{`{"called": "a"}`, "called must be a list of non-empty tool names"},
		{`{"called": null}`, "called must be a list of non-empty tool names"},
		{`{"called": [""]}`, "called must be a list of non-empty tool names"},
		{`{"not_called": [1]}`, "not_called must be a list of non-empty tool names"},
		{`{"counts": []}`, "counts must map tool names to non-negative integers"},
		{`{"counts": {"a": -1}}`, "counts must map tool names to non-negative integers"},
		{`{"counts": {"a": 1.0}}`, "counts must map tool names to non-negative integers"},
		{`{"counts": {"a": true}}`, "counts must map tool names to non-negative integers"},
		{`{"counts": {"": 1}}`, "counts must map tool names to non-negative integers"},
		{`{"arguments": {}}`, "arguments must contain name, value and optional occurrence"},
		{`{"arguments": [{"name": "a"}]}`, "arguments must contain name, value and optional occurrence"},
		{`{"arguments": [{"name": "", "value": 1}]}`, "arguments must contain name, value and optional occurrence"},
		{`{"arguments": [{"name": "a", "value": 1, "occurrence": 0}]}`, "arguments must contain name, value and optional occurrence"},
		{`{"arguments": [{"name": "a", "value": 1, "occurrence": true}]}`, "arguments must contain name, value and optional occurrence"},
		{`{"arguments": [{"name": "a", "value": 1, "extra": 1}]}`, "arguments must contain name, value and optional occurrence"},
		{`{"order": [["a"]]}`, "order must be a list of two-name lists"},
		{`{"order": [["a", "b", "c"]]}`, "order must be a list of two-name lists"},
		{`{"order": ["ab"]}`, "order must be a list of two-name lists"},
		{`{"sequence": "a"}`, "sequence must be a list of non-empty tool names"},
		{`{"strict_sequence": true}`, "strict_sequence requires sequence and must be boolean"},
		{`{"sequence": ["a"], "strict_sequence": 1}`, "strict_sequence requires sequence and must be boolean"},
		{`{"max_steps": -1}`, "max_steps must be a non-negative integer"},
		{`{"max_steps": "3"}`, "max_steps must be a non-negative integer"},
		{`{"sequence": []}`, "sequence must contain at least one tool"},
		{`{"sequence": [], "max_steps": -1}`, "max_steps must be a non-negative integer"},
		// The Go extension.
		{`{"match": "subset"}`, "match requires sequence and must be one of ['strict', 'in_order', 'unordered', 'subset', 'superset']"},
		{`{"sequence": ["a"], "match": "fuzzy"}`, "match requires sequence and must be one of ['strict', 'in_order', 'unordered', 'subset', 'superset']"},
		{`{"sequence": ["a"], "match": "subset", "strict_sequence": false}`, "match and strict_sequence cannot be combined; use match alone"},
		// JSON syntax errors carry a position.
		{"{\n  \"called\": [\"a\",]\n}", "line 2, column 18: invalid JSON: unexpected character ']'"},
	}
	for _, tc := range tests {
		_, err := assert.ParseExpectations([]byte(tc.json))
		if err == nil {
			t.Errorf("ParseExpectations(%s) succeeded; want %q", tc.json, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("ParseExpectations(%s):\n got: %v\nwant: %s", tc.json, err, tc.want)
		}
		if !errors.Is(err, assert.ErrInvalid) {
			t.Errorf("ParseExpectations(%s): %v does not wrap ErrInvalid", tc.json, err)
		}
	}
}

func TestParseExpectations(t *testing.T) {
	t.Parallel()
	got, err := assert.ParseExpectations([]byte(`{
		"called": ["search"], "not_called": ["notify"],
		"counts": {"search": 2, "charge": 1},
		"arguments": [{"name": "search", "value": {"q": "KTM"}, "occurrence": 1},
		              {"name": "lookup_order", "value": {"order": "A1"}}],
		"order": [["lookup_order", "issue_refund"]],
		"sequence": ["lookup_order", "charge"], "strict_sequence": false,
		"max_steps": null
	}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &assert.Expectations{
		Called:    []string{"search"},
		NotCalled: []string{"notify"},
		Counts:    map[string]int{"search": 2, "charge": 1},
		Arguments: []assert.ToolArgs{
			{Name: "search", Value: trace.MustParse(`{"q":"KTM"}`), Occurrence: 1},
			{Name: "lookup_order", Value: trace.MustParse(`{"order":"A1"}`)},
		},
		Order:    [][2]string{{"lookup_order", "issue_refund"}},
		Sequence: []string{"lookup_order", "charge"},
		Match:    assert.InOrder,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("ParseExpectations mismatch (-want +got):\n%s", d)
	}
	assert.Expect(t, refundRun(t), got)
}

// TestParseExpectationsEmptyIsAbsent checks that an empty list or object
// parses as the key left out, so that it survives a round trip (which
// leaves empty fields out).
func TestParseExpectationsEmptyIsAbsent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want *assert.Expectations
	}{
		{`{"called": [], "not_called": [], "counts": {}, "arguments": [], "order": []}`, &assert.Expectations{}},
		{`{"counts": {}, "called": ["a"]}`, &assert.Expectations{Called: []string{"a"}}},
	}
	for _, tc := range tests {
		got, err := assert.ParseExpectations([]byte(tc.in))
		if err != nil {
			t.Fatalf("ParseExpectations(%s): %v", tc.in, err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("ParseExpectations(%s) mismatch (-want +got):\n%s", tc.in, d)
		}
	}
}

// TestExpectationsJSONRoundTrip writes expectations and reads them back.
func TestExpectationsJSONRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []assert.Expectations{
		{},
		{Called: []string{"a"}, Sequence: []string{"a", "b"}},
		{Sequence: []string{"a"}, Match: assert.InOrder, MaxSteps: new(0)},
		{Sequence: []string{"a"}, Match: assert.Superset, Counts: map[string]int{"a": 0}},
		{Arguments: []assert.ToolArgs{{Name: "a", Value: map[string]any{"x": 1.5}, Occurrence: 2}}, Order: [][2]string{{"a", "b"}}},
	}
	for _, e := range tests {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", e, err)
		}
		var back assert.Expectations
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", data, err)
		}
		again, err := json.Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(data) {
			t.Errorf("round trip changed the JSON:\n first: %s\nsecond: %s", data, again)
		}
	}
	e := assert.Expectations{Sequence: []string{"a"}, Match: assert.Unordered}
	if got, want := e.String(), `{"match":"unordered","sequence":["a"]}`; got != want {
		t.Errorf("String() = %s; want %s", got, want)
	}
}

func TestExpectationsValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		e    assert.Expectations
		want string
	}{
		{assert.Expectations{Called: []string{""}}, "called must be a list of non-empty tool names"},
		{assert.Expectations{NotCalled: []string{""}}, "not_called must be a list of non-empty tool names"},
		{assert.Expectations{Counts: map[string]int{"a": -1}}, "counts must map tool names to non-negative integers"},
		{assert.Expectations{Arguments: []assert.ToolArgs{{Value: 1}}}, "arguments must contain name, value and optional occurrence"},
		{assert.Expectations{Arguments: []assert.ToolArgs{{Name: "a", Value: make(chan int)}}}, "arguments[0].value is not JSON: "},
		{assert.Expectations{Order: [][2]string{{"a", ""}}}, "order must be a list of two-name lists"},
		{assert.Expectations{Sequence: []string{"a", ""}}, "sequence must be a list of non-empty tool names"},
		{assert.Expectations{Match: assert.Subset}, "match requires sequence and must be one of ['strict', 'in_order', 'unordered', 'subset', 'superset']"},
		{assert.Expectations{MaxSteps: new(-1)}, "max_steps must be a non-negative integer"},
		{assert.Expectations{Sequence: []string{}}, "sequence must contain at least one tool"},
	}
	for _, tc := range tests {
		err := tc.e.Validate()
		if err == nil || !errors.Is(err, assert.ErrInvalid) || len(err.Error()) < len(tc.want) || err.Error()[:len(tc.want)] != tc.want {
			t.Errorf("Validate(%#v) = %v; want %q", tc.e, err, tc.want)
		}
		if err := tc.e.Check(refundRun(t)); err == nil || !errors.Is(err, assert.ErrInvalid) {
			t.Errorf("Check with invalid %#v = %v; want ErrInvalid", tc.e, err)
		}
	}
}

// TestExpect checks that Expect applies the checks in stepfork's order and
// reports every failure, one per line.
func TestExpect(t *testing.T) {
	t.Parallel()
	tr := refundRun(t)
	tests := []struct {
		name string
		json string
		want string
	}{
		{"pass", `{"called": ["charge"], "counts": {"search": 2}, "sequence": ["search", "issue_refund"], "match": "superset", "max_steps": 7}`, ""},
		{"empty", `{}`, ""},
		{"all failures in order", `{
			"max_steps": 1,
			"sequence": ["issue_refund", "lookup_order"], "strict_sequence": false,
			"order": [["charge", "lookup_order"]],
			"arguments": [{"name": "search", "value": {"q": "BOM"}}, {"name": "search", "value": {"q": "KTM"}, "occurrence": 5}],
			"counts": {"search": 1, "charge": 0},
			"not_called": ["charge"],
			"called": ["notify"]
		}`, "expected tool 'notify' to be called; actual: " + refundTools + "\n" +
			"expected tool 'charge' not to be called; actual: " + refundTools + "\n" +
			"tool 'charge': expected 0 call(s), got 1\n" +
			"tool 'search': expected 1 call(s), got 2\n" +
			"tool 'search': expected arguments {'q': 'BOM'}; actual: [{'q': 'KTM'}, {'limit': 5, 'q': 'DEL'}]\n" +
			"tool 'search': occurrence 5 was not called; got 2 call(s)\n" +
			"expected 'charge' before 'lookup_order'; actual: " + refundTools + "\n" +
			"expected ordered tool subsequence ['issue_refund', 'lookup_order']; actual: " + refundTools + "\n" +
			"first unmatched: 'lookup_order' (position 2 of 2)\n" +
			"expected at most 1 dependency step(s), got 7"},
		{"subset", `{"sequence": ["lookup_order", "search", "charge", "issue_refund"], "match": "subset"}`,
			"expected only tool calls from ['lookup_order', 'search', 'charge', 'issue_refund']; actual: " + refundTools + "\nunexpected: ['search']"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exp, err := assert.ParseExpectations([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			runAssertion(t, func(r assert.TestingT) bool { return assert.Expect(r, tr, exp) }, tc.want)
			if err := exp.Check(tr); tc.want != "" && !errors.Is(err, assert.ErrMismatch) {
				t.Errorf("Check error %v does not wrap ErrMismatch", err)
			}
		})
	}
	runAssertion(t, func(r assert.TestingT) bool { return assert.Expect(r, tr, nil) },
		"no expectations to check: got a nil *Expectations")
}

func TestLoadExpectations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"called": ["lookup_order"], "max_steps": 10}`)
	exp, err := assert.LoadExpectations(good)
	if err != nil {
		t.Fatal(err)
	}
	assert.Expect(t, refundRun(t), exp)

	tests := []struct {
		path, want string
		kind       error
	}{
		{write("shape.json", `{"counts": {"a": -1}}`), filepath.Join(dir, "shape.json") + ": counts must map tool names to non-negative integers", assert.ErrInvalid},
		{write("syntax.json", "{\n\"called\": [\"a\"\n}"), filepath.Join(dir, "syntax.json") + ":3:1: invalid JSON: expected ',' or ']' in array", assert.ErrInvalid},
		{filepath.Join(dir, "missing.json"), "reading trajectory expectations: open " + filepath.Join(dir, "missing.json") + ": no such file or directory", fs.ErrNotExist},
	}
	for _, tc := range tests {
		_, err := assert.LoadExpectations(tc.path)
		if err == nil || err.Error() != tc.want || !errors.Is(err, tc.kind) {
			t.Errorf("LoadExpectations(%s):\n got: %v\nwant: %s (wrapping %v)", filepath.Base(tc.path), err, tc.want, tc.kind)
		}
	}
}

// FuzzParseExpectations checks that no input panics, every error wraps
// ErrInvalid, and accepted expectations survive a JSON round trip.
func FuzzParseExpectations(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `{"called": ["a"], "counts": {"a": 1}}`,
		`{"arguments": [{"name": "a", "value": {"x": [1, 2.5, null]}, "occurrence": 2}]}`,
		`{"sequence": ["a", "b"], "strict_sequence": false, "max_steps": 3}`,
		`{"sequence": ["a"], "match": "superset", "order": [["a", "b"]]}`,
		`{"__import__": "os"}`, `{"counts": {"a": -1}}`, `{"called": ["a",]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := assert.ParseExpectations(data)
		if err != nil {
			if !errors.Is(err, assert.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		out, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("Marshal of parsed %s: %v", data, err)
		}
		back, err := assert.ParseExpectations(out)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", out, err)
		}
		if d := cmp.Diff(e, back); d != "" {
			t.Fatalf("round trip of %s changed the expectations (-first +second):\n%s", data, d)
		}
		_ = e.Check(refundRun(t))
	})
}
