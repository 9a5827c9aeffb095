package volatile

import "testing"

func TestMinted(t *testing.T) {
	t.Parallel()
	ids := map[string]string{
		"call_abcdef123":     "call",
		"chatcmpl-XYZ987654": "response",
		"resp_0011/22+33==":  "response", // not made of id characters
		"call_abcdef1234":    "call",     // longer, sharing a prefix
	}
	cases := []struct{ in, want string }{
		{`{"id":"call_abcdef123","tool_call_id":"call_abcdef123"}`, `{"id":"<call-1>","tool_call_id":"<call-1>"}`},
		{`chatcmpl-XYZ987654 answered call_abcdef1234 then call_abcdef123`, `<response-1> answered <call-2> then <call-1>`},
		{`inside xcall_abcdef123 and call_abcdef123x it stays`, `inside xcall_abcdef123 and call_abcdef123x it stays`},
		{`previous: resp_0011/22+33==.`, `previous: <response-2>.`},
		{`nothing to replace`, `nothing to replace`},
	}
	var n Numbering
	for _, tc := range cases {
		if got := n.Minted(tc.in, ids); got != tc.want {
			t.Errorf("Minted(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := n.Name("call", "call_abcdef123"); got != "<call-1>" {
		t.Errorf("the numbering is kept across texts: %s", got)
	}
	if got := kindName("my kind!"); got != "mykind" {
		t.Errorf("kindName: %s", got)
	}
}

// FuzzMinted: Minted never panics, and leaves no whole-word id of ids in
// its output.
func FuzzMinted(f *testing.F) {
	f.Add(`{"id":"call_abcdef123"} call_abcdef123x`, "call_abcdef123", "chatcmpl-1/2+3")
	f.Add(`chatcmpl-1/2+3 and more`, "call_abcdef123", "chatcmpl-1/2+3")
	f.Add("", "a", "b")
	f.Fuzz(func(t *testing.T, s, id1, id2 string) {
		ids := map[string]string{id1: "call", id2: "response"}
		var n Numbering
		out := n.Minted(s, ids)
		for i := 0; i < len(out); {
			if !idChar(out[i]) {
				i++
				continue
			}
			j := i
			for j < len(out) && idChar(out[j]) {
				j++
			}
			// A word of the output that is an id is one Minted missed,
			// unless it is a placeholder's name, or what was left of a
			// longer word whose other part an id of other characters
			// took (it touches the placeholder).
			if _, ok := ids[out[i:j]]; ok && out[i:j] != "" && !touchesPlaceholder(out, i, j) {
				t.Fatalf("Minted(%q) = %q still holds the id %q", s, out, out[i:j])
			}
			i = j
		}
	})
}

// touchesPlaceholder reports whether the word s[i:j] is the name of a
// placeholder ("<call-1>") or stands right before or after one.
func touchesPlaceholder(s string, i, j int) bool {
	return i > 0 && (s[i-1] == '<' || s[i-1] == '>') || j < len(s) && s[j] == '<'
}

// TestReplace: a rendering's placeholders — minted ids by kind, ids
// numbered in order of first appearance across texts, times unnumbered.
func TestReplace(t *testing.T) {
	t.Parallel()
	const (
		run1 = "run_0123456789abcdef0123456789abcdef"
		run2 = "run_fedcba9876543210fedcba9876543210"
		uuid = "123e4567-e89b-12d3-a456-426614174000"
	)
	minted := map[string]string{"call_abcdef123": "call"}
	cases := []struct{ in, want string }{
		{run2 + " then " + run1 + " then " + run2, "<run-1> then <run-2> then <run-1>"},
		{`{"id":"call_abcdef123","at":"2026-12-03T20:02:04.123Z","uuid":"` + uuid + `"}`, `{"id":"<call-1>","at":"<time>","uuid":"<uuid-1>"}`},
		{"at 2026-12-03 20:02:04+01:00 and 2026-12-03T20:02:04Z", "at <time> and <time>"},
		{run1, "<run-2>"}, // the numbering is kept across texts
		{"short", "short"},
	}
	var n Numbering
	for _, tc := range cases {
		if got := n.Replace(tc.in, minted); got != tc.want {
			t.Errorf("Replace(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
