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
