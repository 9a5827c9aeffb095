package trace_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

func TestCallLanes(t *testing.T) {
	t.Parallel()
	evs := []trace.Event{
		{ID: "r", Type: trace.RunStart},
		{ID: "a", Type: trace.ToolCall, Name: "x", ParentID: "r"},
		{ID: "b", Type: trace.ToolCall, Name: "x", ParentID: "r"},
		{ID: "ra", Type: trace.ToolResult, Name: "x", ParentID: "a", Status: trace.StatusOK},
		{ID: "rb", Type: trace.ToolResult, Name: "x", ParentID: "b", Status: trace.StatusOK},
	}
	for _, tc := range []struct {
		name  string
		lanes string
		want  []int
	}{
		{"no file", "", []int{0, 0}},
		{"one concurrent", `{"b":1}`, []int{0, 1}},
		{"two", `{"a":2,"b":1}`, []int{2, 1}},
		{"unreadable counts as absent", `{"a":0}`, []int{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := &trace.Trace{Events: slices.Clone(evs)}
			if tc.lanes != "" {
				tr.Extras = map[string][]byte{trace.LanesFile: []byte(tc.lanes)}
			}
			var got []int
			for _, c := range tr.Calls() {
				got = append(got, c.Lane)
				if c.Concurrent() != (c.Lane > 0) {
					t.Errorf("call %d: Concurrent() = %v with lane %d", c.Index, c.Concurrent(), c.Lane)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("lanes = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLanesRejectsBadFiles(t *testing.T) {
	t.Parallel()
	for _, data := range []string{`[]`, `null`, `{"a":0}`, `{"a":-1}`, `{"a":"1"}`, `{`} {
		if _, err := trace.Lanes([]byte(data)); err == nil || !strings.Contains(err.Error(), trace.LanesFile) {
			t.Errorf("trace.Lanes(%s) = %v, want an error naming %s", data, err, trace.LanesFile)
		}
	}
	m, err := trace.Lanes([]byte(`{"evt_1":1,"evt_2":3}`))
	if err != nil || m["evt_1"] != 1 || m["evt_2"] != 3 {
		t.Errorf("Lanes = %v, %v", m, err)
	}
}

// A join splits its scope's group into parts; joins of other scopes, of a
// lane of 1 or more, and unreadable joins files do not.
func TestEventLaneParts(t *testing.T) {
	t.Parallel()
	// run: model m1, tools a and b on goroutines, model m2 (a join), tool c
	// on a goroutine, model m3 (a join); inside a: tool x on a goroutine,
	// then y (a join of a's scope).
	evs := []trace.Event{
		{ID: "r", Type: trace.RunStart},
		{ID: "m1", Type: trace.LLMRequest, ParentID: "r"},
		{ID: "a", Type: trace.ToolCall, Name: "a", ParentID: "r"},
		{ID: "x", Type: trace.ToolCall, Name: "x", ParentID: "a"},
		{ID: "y", Type: trace.ToolCall, Name: "y", ParentID: "a"},
		{ID: "b", Type: trace.ToolCall, Name: "b", ParentID: "r"},
		{ID: "m2", Type: trace.LLMRequest, ParentID: "r"},
		{ID: "c", Type: trace.ToolCall, Name: "c", ParentID: "r"},
		{ID: "m3", Type: trace.LLMRequest, ParentID: "r"},
	}
	lanes := `{"a":1,"b":2,"c":3,"x":1}`
	for _, tc := range []struct {
		name  string
		joins string
		want  []int
	}{
		{"no joins", "", []int{0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"joins", `["m2","m3","y"]`, []int{0, 0, 0, 0, 1, 0, 1, 1, 2}},
		{"a join of lane 1 is ignored", `["c"]`, []int{0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"unreadable", `{"m2":true}`, []int{0, 0, 0, 0, 0, 0, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := &trace.Trace{Events: slices.Clone(evs), Extras: map[string][]byte{trace.LanesFile: []byte(lanes)}}
			if tc.joins != "" {
				tr.Extras[trace.JoinsFile] = []byte(tc.joins)
			}
			var got []int
			for _, l := range tr.EventLanes() {
				got = append(got, l.Part)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("parts = %v, want %v", got, tc.want)
			}
		})
	}
	for _, data := range []string{`{}`, `null`, `[1]`, `[`} {
		if _, err := trace.Joins([]byte(data)); err == nil || !strings.Contains(err.Error(), trace.JoinsFile) {
			t.Errorf("trace.Joins(%s) = %v, want an error naming %s", data, err, trace.JoinsFile)
		}
	}
}
