package clip

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestInert(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"plain naïve ✓", "plain naïve ✓"},
		{"tool\nFAKE LINE", `tool\nFAKE LINE`},
		{"a\x1b[31mred", `a\x1b[31mred`},
		{"csi\u009b2J", `csi\u009b2J`},
		{"abc\u202edcba", `abc\u202edcba`},
		{"iso\u2066x\u2069", `iso\u2066x\u2069`},
		{"bad\xffbyte", `bad\xffbyte`},
		{"del\x7f", `del\x7f`},
		{"rlm\u200f", `rlm\u200f`},
	}
	for _, tc := range cases {
		if got := Inert(tc.in); got != tc.want {
			t.Errorf("Inert(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestInertJSON(t *testing.T) {
	t.Parallel()
	in, _ := json.Marshal(map[string]string{"name": "a\u009bb\u202ec\u2028d\x7fe naïve"})
	out := InertJSON(in)
	for _, bad := range []string{"\u009b", "\u202e", "\u2028", "\x7f"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("InertJSON left %q in %s", bad, out)
		}
	}
	var a, b map[string]string
	if err := json.Unmarshal(in, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &b); err != nil || a["name"] != b["name"] {
		t.Errorf("InertJSON changed the value: %q -> %q (%v)", a["name"], b["name"], err)
	}
	plain := []byte(`{"a":"naïve ✓"}`)
	if got := InertJSON(plain); &got[0] != &plain[0] {
		t.Error("InertJSON copied text it had nothing to escape in")
	}
}

func FuzzInert(f *testing.F) {
	f.Add("tool\nFAKE\u009b\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		out := Inert(s)
		for _, r := range out {
			if active(r) {
				t.Fatalf("Inert(%q) = %q holds %U", s, out, r)
			}
		}
		js, _ := json.Marshal(s)
		var back string
		if err := json.Unmarshal(InertJSON(js), &back); err != nil {
			t.Fatalf("InertJSON(%s): %v", js, err)
		}
	})
}
