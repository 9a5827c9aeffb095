package trace

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestBuildRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)
	tests := []struct {
		name string
		b    Build
		file string // testdata/build/<file>: the exact bytes
		str  string
	}{
		{"full", Build{Module: "example.com/support", Version: "(devel)", Revision: "46b7ad0c4abd65b7e0efec1149cdb0d7ddcb7ecd", Time: at, Modified: true, Go: "go1.26.1"},
			"full.json", "example.com/support (devel), revision 46b7ad0c4abd of 2026-03-14, modified, go1.26.1"},
		{"minimal", Build{Module: "example.com/support"}, "minimal.json", "example.com/support"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data, err := MarshalBuild(tt.b)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata", "build", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != string(want) {
				t.Errorf("MarshalBuild =\n%s\nwant\n%s", data, want)
			}
			back, err := ParseBuild(data)
			if err != nil || back != tt.b {
				t.Errorf("ParseBuild = %+v, %v; want %+v", back, err, tt.b)
			}
			if got := back.String(); got != tt.str {
				t.Errorf("String = %q, want %q", got, tt.str)
			}
		})
	}
}

func TestBuildRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data, want string
	}{
		{"unknown key", `{"schema_version":1,"module":"m","branch":"main"}`, `unknown field "branch"`},
		{"no module", `{"schema_version":1}`, "the module is empty"},
		{"schema", `{"schema_version":2,"module":"m"}`, "unsupported schema_version 2"},
		{"revision", `{"schema_version":1,"module":"m","revision":"HEAD"}`, `revision "HEAD" is not a commit hash`},
		{"time", `{"schema_version":1,"module":"m","time":"yesterday"}`, `time "yesterday" is not an RFC 3339 time`},
		{"two values", `{"schema_version":1,"module":"m"} {}`, "more than one JSON value"},
		{"not an object", `[]`, "build.json: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseBuild([]byte(tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), BuildFile+": ") {
				t.Errorf("ParseBuild(%s) = %v, want an error with %q", tt.data, err, tt.want)
			}
		})
	}
	if _, err := MarshalBuild(Build{Module: "m", Revision: "main"}); err == nil {
		t.Error("MarshalBuild accepted a branch name as a revision")
	}
}

// TestBuildInBundle saves a trace with a build.json: integrity.json covers
// it, Load reads it back, and Trace.Build decodes it.
func TestBuildInBundle(t *testing.T) {
	t.Parallel()
	b := NewBuilder("agent")
	b.RunStart(nil)
	b.RunEnd(RunCompleted, nil)
	tr := b.MustTrace()
	data, err := MarshalBuild(Build{Module: "example.com/support", Revision: "46b7ad0c4abd"})
	if err != nil {
		t.Fatal(err)
	}
	tr.Extras = map[string][]byte{BuildFile: data}
	p := filepath.Join(t.TempDir(), "run.sftrace")
	if err := tr.Save(p); err != nil {
		t.Fatal(err)
	}
	if res := VerifyIntegrity(p); res.Status != IntegrityVerified || !strings.Contains(strings.Join(res.VerifiedFiles, " "), BuildFile) {
		t.Fatalf("integrity = %+v, want build.json verified", res)
	}
	back, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := back.Build()
	if err != nil || !ok || got.Module != "example.com/support" || got.Short() != "46b7ad0c4abd" {
		t.Fatalf("Build() = %+v, %v, %v", got, ok, err)
	}
	if _, ok, err := NewBuilder("agent").MustTrace().Build(); ok || err != nil {
		t.Errorf("a trace without build.json: ok %v, err %v", ok, err)
	}
}

// FuzzBuild: ParseBuild never panics, and a build it accepts re-encodes to
// bytes that parse back to the same build.
func FuzzBuild(f *testing.F) {
	for _, p := range []string{"full.json", "minimal.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "build", p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"schema_version":1,"module":"m","time":"2026-03-14T09:30:00+02:00"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBuild(data)
		if err != nil {
			return
		}
		out, err := MarshalBuild(b)
		if err != nil {
			t.Fatalf("an accepted build does not encode: %v", err)
		}
		back, err := ParseBuild(out)
		if err != nil || back.Module != b.Module || back.Revision != b.Revision || !back.Time.Equal(b.Time) {
			t.Fatalf("re-encoded build differs: %+v, %v; want %+v", back, err, b)
		}
	})
}

// TestMarshalBuildSortedKeys: build.json is written with its keys sorted,
// as encoding/json writes a map, whatever its texts hold. The reference is
// the map encoding MarshalBuild used before it encoded its struct, whose
// fields are in key order, directly.
func TestMarshalBuildSortedKeys(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 14, 9, 30, 0, 0, time.FixedZone("x", 3600))
	texts := []string{"", "example.com/a", `q"uote\back`, "<tag>&amp;", "tab\tnew\nline\x01", "\u2028\u2029", "bad \xff utf-8", "two \xff\xfe bad", "cut \xe6\x97", "ünï 日本"}
	for i, text := range texts {
		b := Build{Module: "m" + text, Version: text, Go: text, Modified: i%2 == 0}
		if i%3 == 0 {
			b.Revision, b.Time = "46b7ad0", at
		}
		got, err := MarshalBuild(b)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if want := mapEncodedBuild(t, got); string(got) != want {
			t.Errorf("%q: MarshalBuild =\n%s\nwant (keys sorted)\n%s", text, got, want)
		}
	}
}

// mapEncodedBuild re-encodes build.json through a map, as encoding/json
// writes it with sorted keys.
func mapEncodedBuild(t *testing.T, data []byte) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestIsRevision: a revision is 7 to 64 lowercase hexadecimal digits, as
// the regular expression ^[0-9a-f]{7,64}$ says.
func TestIsRevision(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[0-9a-f]{7,64}$`)
	cases := []string{"", "46b7ad", "46b7ad0", "46B7AD0", "46b7ad0c4abd", strings.Repeat("a", 64), strings.Repeat("a", 65),
		"46b7ad0\n", " 46b7ad0", "46b7ad0g", "HEAD", "46b7ad0c4abd65b7e0efec1149cdb0d7ddcb7ecd", "ｆ46b7ad0", "46b7ad\x000"}
	for _, s := range cases {
		if got, want := isRevision(s), re.MatchString(s); got != want {
			t.Errorf("isRevision(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzIsRevision: isRevision agrees with ^[0-9a-f]{7,64}$ on every input.
func FuzzIsRevision(f *testing.F) {
	re := regexp.MustCompile(`^[0-9a-f]{7,64}$`)
	f.Add("46b7ad0c4abd")
	f.Add("46B7AD0")
	f.Add(strings.Repeat("f", 65))
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isRevision(s), re.MatchString(s); got != want {
			t.Fatalf("isRevision(%q) = %v, want %v", s, got, want)
		}
	})
}
