package trace

import (
	"strings"
	"testing"
)

// markerObject is the marker payload built member by member, the way
// MarkerEvent built it before it wrote the canonical text directly.
func markerObject(t *testing.T, m Marker) Value {
	t.Helper()
	var ms []Member
	for _, kv := range [][2]string{{"name", m.Name}, {"phase", m.Phase}, {"status", m.Status},
		{"error", m.Error}, {"error_type", m.ErrorType}, {"kind", m.Kind}} {
		if kv[1] != "" {
			ms = append(ms, Member{kv[0], StringValue(kv[1])})
		}
	}
	if !m.Value.IsAbsent() {
		ms = append(ms, Member{"value", m.Value})
	}
	if m.Forced {
		ms = append(ms, Member{"forced", TrueValue})
	}
	v, err := ObjectValue(ms...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMarkerEventIsCanonical(t *testing.T) {
	t.Parallel()
	obj, err := ValueOf(map[string]any{"b": 1, "a": []any{"x", nil, 2.5}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []Marker{
		{Key: MarkerNode},
		{Key: MarkerNode, Name: "plan", Phase: PhaseEnter},
		{Key: MarkerNode, Name: "plan", Phase: PhaseExit, Status: NodeStatusFail, Error: "boom: \"quoted\"\n\ttab \\ \x01"},
		{Key: MarkerDecision, Name: "route", Kind: KindApproval, Value: StringValue("yes"), Forced: true},
		{Key: MarkerEffect, Name: "pay", ErrorType: "Timeout", Error: "late", Value: obj},
		{Key: MarkerParam, Name: "ünïcode ☃ \u2028", Value: NullValue},
		{Key: MarkerNow, Name: "bad utf-8 \xff\xfe", Value: IntValue(-3)},
		{Key: MarkerID, Forced: true},
	}
	for _, m := range cases {
		ev := MarkerEvent(m)
		want := markerObject(t, m)
		if ev.After != want {
			t.Errorf("MarkerEvent(%+v).After = %s, want %s", m, ev.After.raw, want.raw)
		}
		if _, err := ParseValue([]byte(ev.After.raw)); err != nil {
			t.Errorf("MarkerEvent(%+v) is not valid JSON: %v", m, err)
		}
		if c, err := ParseValue([]byte(ev.After.raw)); err == nil && c != ev.After {
			t.Errorf("MarkerEvent(%+v).After = %s is not canonical (%s)", m, ev.After.raw, c.raw)
		}
		back, ok := ev.Marker()
		if !ok || back.Name != strings.ToValidUTF8(m.Name, "\uFFFD") || back.Phase != m.Phase || back.Status != m.Status || back.Kind != m.Kind ||
			back.ErrorType != m.ErrorType || back.Forced != m.Forced || !sameValue(back.Value, m.Value) {
			t.Errorf("Marker() of MarkerEvent(%+v) = %+v", m, back)
		}
	}
}

func sameValue(a, b Value) bool { return a == b || a.IsAbsent() && b.IsAbsent() }
