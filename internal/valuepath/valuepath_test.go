package valuepath

import (
	"strings"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

func TestDropAndApply(t *testing.T) {
	t.Parallel()
	in := trace.MustParse(`{"messages":[{"content":"a","role":"system"},{"content":"b","role":"user"}],"system":"s","x.y":{"z":1},"n":[3,1,2]}`)
	tests := []struct {
		path, want string
	}{
		{"system", `{"messages":[{"content":"a","role":"system"},{"content":"b","role":"user"}],"n":[3,1,2],"x.y":{"z":1}}`},
		{"messages[0].content", `{"messages":[{"role":"system"},{"content":"b","role":"user"}],"n":[3,1,2],"system":"s","x.y":{"z":1}}`},
		{"messages[*].role", `{"messages":[{"content":"a"},{"content":"b"}],"n":[3,1,2],"system":"s","x.y":{"z":1}}`},
		{"messages[1]", `{"messages":[{"content":"a","role":"system"}],"n":[3,1,2],"system":"s","x.y":{"z":1}}`},
		{`["x.y"].z`, `{"messages":[{"content":"a","role":"system"},{"content":"b","role":"user"}],"n":[3,1,2],"system":"s","x.y":{}}`},
		{"*", `{}`},
		{"missing.deeper", in.Canonical()},
		{"system[0]", in.Canonical()},
	}
	for _, tt := range tests {
		p, err := Parse(tt.path)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.path, err)
		}
		if got := p.Drop(in); got.Canonical() != tt.want {
			t.Errorf("Drop(%q) =\n%s\nwant\n%s", tt.path, got, tt.want)
		}
	}
	upper := MustParse("messages[*].content").Apply(in, func(v trace.Value) trace.Value {
		s, _ := v.Str()
		return trace.StringValue(strings.ToUpper(s))
	})
	if want := `{"messages":[{"content":"A","role":"system"},{"content":"B","role":"user"}],"n":[3,1,2],"system":"s","x.y":{"z":1}}`; upper.Canonical() != want {
		t.Errorf("Apply = %s, want %s", upper, want)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"":      "the path is empty",
		"a..b":  "an empty member name",
		".a":    "an empty member name",
		"a.":    "ends with '.'",
		"a[":    "is not closed",
		"a[x]":  `index "x" is not a non-negative integer`,
		"a[-1]": `index "-1"`,
		"a[01]": `index "01"`,
		"a]":    "an unopened ']'",
		"a[0]b": "must follow a '.'",
		`a["b"`: "is not closed",
		`a["b]`: "not a JSON string",
	} {
		_, err := Parse(path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", path, err, want)
		}
	}
}

// FuzzParse: Parse never panics, and a parsed path drops from any value
// without panicking.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"system", "messages[0].content", "tools[*].name", `headers["x-request.id"]`, "*", "a[1][2]"} {
		f.Add(s)
	}
	v := trace.MustParse(`{"a":[[1,2],[3]],"messages":[{"content":"x"}],"headers":{"x-request.id":"r"}}`)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			return
		}
		if p.String() != s {
			t.Fatalf("String() = %q, want %q", p.String(), s)
		}
		_ = p.Drop(v)
	})
}
