package placeholder

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
			// A word of the output that is an id either was in the input
			// next to a placeholder's '>' or '<' (never: those delimit
			// words) or is one Minted missed.
			if _, ok := ids[out[i:j]]; ok && out[i:j] != "" && !inPlaceholderName(out, i) {
				t.Fatalf("Minted(%q) = %q still holds the id %q", s, out, out[i:j])
			}
			i = j
		}
	})
}

// inPlaceholderName reports whether the word at i is the kind or number of
// a placeholder ("<call-1>").
func inPlaceholderName(s string, i int) bool {
	return i > 0 && s[i-1] == '<'
}
