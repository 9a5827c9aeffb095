package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stepfork/stepfork/trace"
)

func TestClean(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"café ☃", "café ☃"},
		{"a\nb\tc", `a\nb\tc`},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"bidi \u202eevil", `bidi \u202eevil`},
		{"bad \xff byte", `bad \xff byte`},
		{"key sk-abcdefghijklmnop end", "key [REDACTED] end"},
		{"Authorization: Bearer abcdefghijkl", "Authorization: Bearer [REDACTED]"},
	}
	for _, tt := range tests {
		if got := clean(tt.in); got != tt.want {
			t.Errorf("clean(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAppendPyJSON(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"b":1e-05,"a":[1.0,1,"x\u2028y"]}`, "{\"a\":[1.0,1,\"x\u2028y\"],\"b\":0.00001}"},
		{`1.5e-07`, `1.5e-7`},
		{`null`, `null`},
		{`{"k":"<&>"}`, `{"k":"<&>"}`},
	}
	for _, tt := range tests {
		if got := string(appendPyJSON(nil, trace.MustParse(tt.in))); got != tt.want {
			t.Errorf("appendPyJSON(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if got := string(appendPyJSON(nil, trace.Value{})); got != "null" {
		t.Errorf("absent = %s", got)
	}
}

func TestParseInterspersed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		pos  []string
		json bool
	}{
		{[]string{"a", "--json"}, []string{"a"}, true},
		{[]string{"--json", "a", "b"}, []string{"a", "b"}, true},
		{[]string{"a", "--", "--json"}, []string{"a", "--json"}, false},
		{[]string{"a", "b"}, []string{"a", "b"}, false},
	}
	for _, tt := range tests {
		fs := newFlagSet("t")
		j := fs.Bool("json", false, "")
		pos, err := parseInterspersed(fs, tt.args)
		if err != nil || !slices.Equal(pos, tt.pos) || *j != tt.json {
			t.Errorf("%q: pos %q json %v err %v; want %q %v", tt.args, pos, *j, err, tt.pos, tt.json)
		}
	}
	fs := newFlagSet("t")
	if _, err := parseInterspersed(fs, []string{"a", "--nope"}); err == nil || !strings.Contains(err.Error(), "-nope") {
		t.Errorf("unknown flag: %v", err)
	}
	fs = newFlagSet("t")
	if _, err := parseInterspersed(fs, []string{"-h"}); err != flag.ErrHelp {
		t.Errorf("-h: %v", err)
	}
}

func TestParseAgent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, path, fn, err string
	}{
		{in: "example.com/app/agent.Run", path: "example.com/app/agent", fn: "Run"},
		{in: "example.com/go-app/v2.Agent", path: "example.com/go-app/v2", fn: "Agent"},
		{in: "agent.Run", path: "agent", fn: "Run"},
		{in: "Run", fn: "Run"},
		{in: "run", fn: "run"},
		{in: "example.com/a.b/c", err: "names no function"},
		{in: "example.com/app.run", err: "not exported"},
		{in: "example.com/app.Run()", err: "is not a Go function name"},
		{in: `ex"ample.com/app.Run`, err: "invalid character"},
		{in: "../x.Run", err: "invalid import path"},
		{in: "/abs.Run", err: "invalid import path"},
		{in: "a b.Run", err: "invalid character"},
	}
	for _, tt := range tests {
		path, fn, err := parseAgent(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseAgent(%q) error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || path != tt.path || fn != tt.fn {
			t.Errorf("parseAgent(%q) = %q, %q, %v; want %q, %q", tt.in, path, fn, err, tt.path, tt.fn)
		}
	}
}

func TestIdentifiers(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"booking-agent": "BookingAgent", "run_1000_calls.changed": "Run1000CallsChanged", "café": "Caf", "": ""} {
		if got := goIdentifierCamel(in); got != want {
			t.Errorf("goIdentifierCamel(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"booking-agent": "booking_agent", "go-app": "go_app", "2fa": "trace_2fa", "func": "trace_func", "": "trace", "--": "trace"} {
		if got := goIdentifierSnake(in); got != want {
			t.Errorf("goIdentifierSnake(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"a/b.sftrace": "a/b.sftrace", "it's": `'it'\''s'`, "a b": "'a b'", "": "''"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the progress goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestProgress(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	p := runProgress(&buf, "Validating big.sftrace", 80<<20, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	p.stop()
	out := buf.String()
	if !strings.Contains(out, "Validating big.sftrace (80 MB)… 0s") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("progress output %q", out)
	}
	p.stop() // stopping twice is harmless
	if buf.String() != out {
		t.Error("progress wrote after stop")
	}

	// Not a terminal, or a small bundle: nothing at all.
	var quiet bytes.Buffer
	e := &env{stderr: &quiet, errTerminal: false}
	e.startProgress("x", 1<<30).stop()
	e.errTerminal = true
	e.startProgress("x", 1<<10).stop()
	if quiet.Len() != 0 {
		t.Errorf("progress shown: %q", quiet.String())
	}
}

func TestNewEnvColor(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	tests := []struct {
		env  map[string]string
		want bool
	}{
		{nil, false}, // a buffer is not a terminal
		{map[string]string{"CLICOLOR_FORCE": "1"}, true},
		{map[string]string{"CLICOLOR_FORCE": "0"}, false},
		{map[string]string{"CLICOLOR_FORCE": "1", "NO_COLOR": "1"}, false},
		{map[string]string{"CLICOLOR_FORCE": "1", "NO_COLOR": ""}, true},
	}
	for _, tt := range tests {
		e := newEnv(&out, &out, func(k string) string { return tt.env[k] })
		if e.color != tt.want {
			t.Errorf("env %v: color %v, want %v", tt.env, e.color, tt.want)
		}
		if got := e.paint(styleRed, "x"); (got != "x") != tt.want {
			t.Errorf("env %v: paint = %q", tt.env, got)
		}
	}
}

// BenchmarkOTLP1000Calls exports the 1,000-call Python recording as OTLP
// JSON lines, content included. It checks that the last export is OTLP
// TracesData holding the root span and one span per call.
func BenchmarkOTLP1000Calls(b *testing.B) {
	tr, err := trace.Load("../../testdata/vectors/stepfork-recorded/run_1000_calls.sftrace")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var out []byte
	for b.Loop() {
		if out, err = otlpLines(tr, true); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(out)))
	spans := 0
	for line := range bytes.Lines(out) {
		var f otlpFile
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			b.Fatalf("line is not OTLP TracesData: %v\n%s", err, line)
		}
		for _, rs := range f.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans += len(ss.Spans)
			}
		}
	}
	if want := 1 + len(tr.Calls()); spans != want {
		b.Fatalf("%d spans, want %d: the root and one per call", spans, want)
	}
}

// BenchmarkInspectJSON1000Calls writes the JSON of `stepfork inspect
// --json` of the 1,000-call Python recording. It checks that the last one
// is JSON holding the run's event count and its timeline, every event in
// order.
func BenchmarkInspectJSON1000Calls(b *testing.B) {
	tr, err := trace.Load("../../testdata/vectors/stepfork-recorded/run_1000_calls.sftrace")
	if err != nil {
		b.Fatal(err)
	}
	timeline := make([]*trace.Event, len(tr.Events))
	for i := range tr.Events {
		timeline[i] = &tr.Events[i]
	}
	b.ReportAllocs()
	var out []byte
	for b.Loop() {
		out = inspectionJSON(tr, "x.sftrace", trace.IntegrityVerified, timeline)
	}
	b.SetBytes(int64(len(out)))
	var got struct {
		Events   int `json:"events"`
		Timeline []struct {
			ID   string `json:"id"`
			Step int    `json:"step"`
		} `json:"timeline"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		b.Fatal(err)
	}
	if got.Events != len(tr.Events) || len(got.Timeline) != len(timeline) {
		b.Fatalf("%d events, a timeline of %d; want %d", got.Events, len(got.Timeline), len(tr.Events))
	}
	for i, ev := range got.Timeline {
		if ev.ID != timeline[i].ID || ev.Step != timeline[i].Step {
			b.Fatalf("timeline entry %d is %s at step %d, want %s at step %d", i, ev.ID, ev.Step, timeline[i].ID, timeline[i].Step)
		}
	}
}
