package trace

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goodLine is a valid run_start line of events.jsonl; badLine edits it.
const goodLine = `{"id":"evt_001","run_id":"run_bad","parent_id":null,"step":0,"type":"run_start",` +
	`"timestamp":"2026-01-02T03:04:05Z","duration_ms":null,"status":"ok","replay_policy":"frozen",` +
	`"input_hash":null,"output_hash":null,"redactions":[],"input":{"q":1}}`

// badLine returns goodLine with old replaced by new; it fails the test when
// old does not occur, so that a typo cannot turn a case into a no-op.
func badLine(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(goodLine, old) {
		t.Fatalf("%q does not occur in goodLine", old)
	}
	return strings.Replace(goodLine, old, new, 1)
}

// savedBundle saves a small valid trace into a fresh temporary directory and
// returns the bundle path.
func savedBundle(t *testing.T) string {
	t.Helper()
	b := NewBuilder("bad")
	b.RunStart(map[string]any{"q": 1})
	b.Tool("search", map[string]any{"to": "LIS"}, map[string]any{"price": 320.5})
	b.RunEnd(RunCompleted, "done")
	dst := filepath.Join(t.TempDir(), "bad.sftrace")
	if err := b.MustTrace().Save(dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func writeBundleFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// loadErr loads path and returns its error, failing the test when Load
// succeeds or the error does not match ErrStorage.
func loadErr(t *testing.T, path string) error {
	t.Helper()
	tr, err := Load(path)
	if err == nil {
		t.Fatalf("Load(%s) succeeded with %d events; want an error", path, len(tr.Events))
	}
	if !errors.Is(err, ErrStorage) {
		t.Errorf("error %q does not match ErrStorage", err)
	}
	return err
}

func TestBadEventsFile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		events  func(t *testing.T) string
		line    int
		wantMsg string
	}{
		{"two newlines", func(*testing.T) string { return "\n\n" }, 1, "blank JSONL line"},
		{"just a newline", func(*testing.T) string { return "\n" }, 1, "blank JSONL line"},
		{"whitespace-only line", func(*testing.T) string { return goodLine + "\n  \t \n" }, 2, "blank JSONL line"},
		{"blank line in the middle", func(*testing.T) string { return goodLine + "\n\n" + goodLine + "\n" }, 2, "blank JSONL line"},
		{"CRLF blank line", func(*testing.T) string { return goodLine + "\r\n\r\n" }, 2, "blank JSONL line"},
		{"truncated object", func(*testing.T) string { return "{" }, 1, "invalid JSON"},
		{"truncated second line", func(*testing.T) string { return goodLine + "\n" + goodLine[:40] + "\n" }, 2, "invalid JSON"},
		{"not JSON", func(*testing.T) string { return "hello\n" }, 1, "invalid JSON"},
		{"trailing garbage", func(*testing.T) string { return goodLine + "x\n" }, 1, "invalid JSON"},
		{"NaN", func(t *testing.T) string { return badLine(t, `{"q":1}`, `{"q":NaN}`) + "\n" }, 1, "invalid JSON: non-finite floats are not supported"},
		{"Infinity", func(t *testing.T) string { return badLine(t, `{"q":1}`, `Infinity`) + "\n" }, 1, "invalid JSON: non-finite floats are not supported"},
		{"-Infinity", func(t *testing.T) string { return badLine(t, `{"q":1}`, `[-Infinity]`) + "\n" }, 1, "invalid JSON: non-finite floats are not supported"},
		{"float overflow", func(t *testing.T) string { return badLine(t, `{"q":1}`, `1e999`) + "\n" }, 1, "non-finite floats are not supported"},
		{"NaN in cost_usd", func(t *testing.T) string {
			return `{"id":"e","run_id":"r","step":0,"type":"llm_response","timestamp":"2026-01-02T03:04:05Z","output":null,"cost_usd":NaN}` + "\n"
		}, 1, "non-finite"},
		{"duplicate key", func(t *testing.T) string { return badLine(t, `"step":0,`, `"step":0,"step":1,`) + "\n" }, 1, "duplicate object key"},
		{"lone surrogate", func(t *testing.T) string { return badLine(t, `{"q":1}`, `"\ud800"`) + "\n" }, 1, "lone UTF-16 surrogate"},
		{"invalid UTF-8", func(t *testing.T) string { return badLine(t, `{"q":1}`, "\"\xff\"") + "\n" }, 1, "invalid UTF-8"},
		{"invalid UTF-8 in id", func(t *testing.T) string { return badLine(t, `"evt_001"`, "\"e\xc1vt_0001234\"") + "\n" }, 1, "invalid UTF-8"},
		{"invalid UTF-8 in key", func(t *testing.T) string { return badLine(t, `{"q":1}`, "{\"q\xc1qqqqqqqq\":1}") + "\n" }, 1, "invalid UTF-8"},
		{"unknown key", func(t *testing.T) string { return badLine(t, `"step":0,`, `"step":0,"extra":1,`) + "\n" }, 1, `invalid event: unknown field "extra"`},
		{"key of another type", func(t *testing.T) string { return badLine(t, `"input":{"q":1}`, `"input":{"q":1},"output":2`) + "\n" }, 1, `unknown field "output" for type run_start`},
		{"unknown event type", func(t *testing.T) string { return badLine(t, `"run_start"`, `"framework_magic"`) + "\n" }, 1, `invalid event: unknown event type "framework_magic"`},
		{"missing type", func(t *testing.T) string { return badLine(t, `"type":"run_start",`, ``) + "\n" }, 1, "invalid event: type is required"},
		{"not an object", func(*testing.T) string { return "[1,2]\n" }, 1, "invalid event: an event must be a JSON object"},
		{"naive timestamp", func(t *testing.T) string { return badLine(t, `05Z"`, `05"`) + "\n" }, 1, "invalid event: timestamp must be timezone-aware"},
		{"naive timestamp with fraction", func(t *testing.T) string { return badLine(t, `05Z"`, `05.123456"`) + "\n" }, 1, "timestamp must be timezone-aware"},
		{"unix timestamp", func(t *testing.T) string { return badLine(t, `"2026-01-02T03:04:05Z"`, `1767323045`) + "\n" }, 1, "timestamp must be a string"},
		{"date-only timestamp", func(t *testing.T) string { return badLine(t, `"2026-01-02T03:04:05Z"`, `"2026-01-02"`) + "\n" }, 1, "is not an RFC 3339 date-time"},
		{"nanosecond timestamp", func(t *testing.T) string { return badLine(t, `05Z"`, `05.123456789Z"`) + "\n" }, 1, "more than microsecond precision"},
		{"missing id", func(t *testing.T) string { return badLine(t, `"id":"evt_001",`, ``) + "\n" }, 1, "invalid event: id is required"},
		{"missing run_id", func(t *testing.T) string { return badLine(t, `"run_id":"run_bad",`, ``) + "\n" }, 1, "invalid event: run_id is required"},
		{"missing timestamp", func(t *testing.T) string { return badLine(t, `"timestamp":"2026-01-02T03:04:05Z",`, ``) + "\n" }, 1, "invalid event: timestamp is required"},
		{"empty id", func(t *testing.T) string { return badLine(t, `"evt_001"`, `""`) + "\n" }, 1, "id must be a non-empty string"},
		{"step as string", func(t *testing.T) string { return badLine(t, `"step":0`, `"step":"3"`) + "\n" }, 1, "step must be an integer"},
		{"step as float", func(t *testing.T) string { return badLine(t, `"step":0`, `"step":3.0`) + "\n" }, 1, "step must be an integer"},
		{"step as bool", func(t *testing.T) string { return badLine(t, `"step":0`, `"step":true`) + "\n" }, 1, "step must be an integer"},
		{"step too large", func(t *testing.T) string { return badLine(t, `"step":0`, `"step":99999999999999999999`) + "\n" }, 1, "step must be an integer"},
		{"negative step", func(t *testing.T) string { return badLine(t, `"step":0`, `"step":-1`) + "\n" }, 1, "step must be >= 0"},
		{"negative duration", func(t *testing.T) string { return badLine(t, `"duration_ms":null`, `"duration_ms":-5`) + "\n" }, 1, "duration_ms must be >= 0"},
		{"duration as string", func(t *testing.T) string { return badLine(t, `"duration_ms":null`, `"duration_ms":"5"`) + "\n" }, 1, "duration_ms must be an integer"},
		{"negative tokens", func(*testing.T) string {
			return `{"id":"e","run_id":"r","step":0,"type":"llm_response","timestamp":"2026-01-02T03:04:05Z","output":null,"prompt_tokens":-1}` + "\n"
		}, 1, "prompt_tokens must be >= 0"},
		{"negative cost", func(*testing.T) string {
			return `{"id":"e","run_id":"r","step":0,"type":"llm_response","timestamp":"2026-01-02T03:04:05Z","output":null,"cost_usd":-0.01}` + "\n"
		}, 1, "cost_usd must be >= 0"},
		{"cost as string", func(*testing.T) string {
			return `{"id":"e","run_id":"r","step":0,"type":"llm_response","timestamp":"2026-01-02T03:04:05Z","output":null,"cost_usd":"0.1"}` + "\n"
		}, 1, "cost_usd must be a number or null"},
		{"unknown status", func(t *testing.T) string { return badLine(t, `"status":"ok"`, `"status":"fine"`) + "\n" }, 1, `status "fine" is not one of ok, error, skipped`},
		{"unknown replay policy", func(t *testing.T) string { return badLine(t, `"frozen"`, `"surprise"`) + "\n" }, 1, `replay_policy "surprise"`},
		{"redactions not a list", func(t *testing.T) string { return badLine(t, `"redactions":[]`, `"redactions":"x"`) + "\n" }, 1, "redactions must be a list of strings"},
		{"redactions with a number", func(t *testing.T) string { return badLine(t, `"redactions":[]`, `"redactions":["/a",1]`) + "\n" }, 1, "redactions must be a list of strings"},
		{"tool_call without input", func(*testing.T) string {
			return `{"id":"e","run_id":"r","step":0,"type":"tool_call","timestamp":"2026-01-02T03:04:05Z","name":"x"}` + "\n"
		}, 1, "tool_call requires input"},
		{"tool_call with empty name", func(*testing.T) string {
			return `{"id":"e","run_id":"r","step":0,"type":"tool_call","timestamp":"2026-01-02T03:04:05Z","name":"","input":1}` + "\n"
		}, 1, "name must be a non-empty string"},
		{"run_end with bad run_status", func(*testing.T) string {
			return `{"id":"e","run_id":"r","step":0,"type":"run_end","timestamp":"2026-01-02T03:04:05Z","run_status":"done"}` + "\n"
		}, 1, "run_end requires run_status"},
		{"UTF-8 BOM", func(*testing.T) string { return "\ufeff" + goodLine + "\n" }, 1, "byte order mark"},
		{"too deep", func(t *testing.T) string { return badLine(t, `{"q":1}`, nested(MaxDepth+1)) + "\n" }, 1, "maximum nesting depth of 1000"},
		{"too deep object", func(t *testing.T) string { return badLine(t, `{"q":1}`, nestedObjects(MaxDepth+1)) + "\n" }, 1, "maximum nesting depth of 1000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := savedBundle(t)
			writeBundleFile(t, dir, EventsFile, tc.events(t))
			err := loadErr(t, dir)
			want := filepath.Join(dir, EventsFile) + ":" + itoa(tc.line) + ": "
			if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Load error = %q\nwant prefix %q and %q", err, want, tc.wantMsg)
			}
			var le *LineError
			if !errors.As(err, &le) || le.Line != tc.line {
				t.Errorf("error %q: want a *LineError at line %d, got %#v", err, tc.line, le)
			}
			// The streaming reader reports the same error at the same line.
			r, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var got error
			for _, err := range r.Events() {
				if err != nil {
					got = err
				}
			}
			if got == nil || !strings.Contains(got.Error(), tc.wantMsg) || !errors.As(got, &le) || le.Line != tc.line {
				t.Errorf("Open/Events error = %v; want %q at line %d", got, tc.wantMsg, tc.line)
			}
		})
	}
}

// nested returns depth nested arrays around 1.
func nested(depth int) string {
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)
}

// nestedObjects returns depth nested objects {"a":{"a":…}} around 1.
func nestedObjects(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}

func TestEventsDepthLimit(t *testing.T) {
	t.Parallel()
	for _, payload := range []string{nested(MaxDepth), nestedObjects(MaxDepth)} {
		dir := savedBundle(t)
		line := strings.Replace(goodLine, `{"q":1}`, payload, 1)
		writeBundleFile(t, dir, EventsFile, line+"\n")
		tr, err := Load(dir)
		if err != nil {
			t.Fatalf("payload nested %d deep: %v", MaxDepth, err)
		}
		if got := tr.Events[0].Input.Canonical(); got != payload {
			t.Errorf("payload changed on load: %.40q…", got)
		}
		// The same limits hold for values parsed directly.
		if _, err := ParseValue([]byte(payload)); err != nil {
			t.Errorf("ParseValue at the depth limit: %v", err)
		}
	}
	for _, payload := range []string{nested(MaxDepth + 1), nestedObjects(MaxDepth + 1), nested(100 * MaxDepth)} {
		if _, err := ParseValue([]byte(payload)); !errors.Is(err, ErrCanonical) {
			t.Errorf("ParseValue of %d bytes nested past the limit: err = %v, want ErrCanonical", len(payload), err)
		}
	}
}

// TestCRLFAccepted pins the decision that events.jsonl may use CRLF line
// endings (as Python's universal-newline reader does): the events and their
// payload hashes are identical to those of the LF file.
func TestCRLFAccepted(t *testing.T) {
	t.Parallel()
	dir := savedBundle(t)
	lf, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{EventsFile, ManifestFile, RedactionsFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		writeBundleFile(t, dir, name, strings.ReplaceAll(string(data), "\n", "\r\n"))
	}
	crlf, err := Load(dir)
	if err != nil {
		t.Fatalf("CRLF bundle: %v", err)
	}
	if len(crlf.Events) != len(lf.Events) || len(crlf.Events) == 0 {
		t.Fatalf("CRLF bundle has %d events, LF bundle %d", len(crlf.Events), len(lf.Events))
	}
	for i := range lf.Events {
		a, b := &lf.Events[i], &crlf.Events[i]
		ai, ao := a.ExpectedHashes()
		bi, bo := b.ExpectedHashes()
		if ai != bi || ao != bo || a.InputHash != b.InputHash || a.OutputHash != b.OutputHash {
			t.Errorf("event %d: hashes differ between LF and CRLF files", i)
		}
		if string(appendEvent(nil, a)) != string(appendEvent(nil, b)) {
			t.Errorf("event %d differs between LF and CRLF files", i)
		}
	}
	if crlf.Manifest.RunID != lf.Manifest.RunID || crlf.Totals != lf.Totals {
		t.Errorf("manifest differs: %+v vs %+v", crlf.Manifest, lf.Manifest)
	}
	// A lone CR is not a line ending: it stays inside the line and makes it
	// invalid JSON rather than being silently accepted.
	writeBundleFile(t, dir, EventsFile, goodLine+"\r"+goodLine+"\n")
	if err := loadErr(t, dir); !strings.Contains(err.Error(), EventsFile+":1: invalid JSON") {
		t.Errorf("lone CR: %v", err)
	}
}

// TestLongLine checks MaxLineBytes: a line longer than the limit is refused
// with its line number, after buffering at most the limit.
func TestLongLine(t *testing.T) {
	dir := savedBundle(t)
	// Line 2 is a valid event whose input is a string of MaxLineBytes 'a's,
	// so that only its length is wrong.
	name := filepath.Join(dir, EventsFile)
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	head, tail := `{"id":"e","run_id":"r","step":0,"type":"run_start","timestamp":"2026-01-02T03:04:05Z","input":"`, "\"}\n"
	chunk := bytes.Repeat([]byte{'a'}, 1<<20)
	mustWrite := func(b []byte) {
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite([]byte(goodLine + "\n" + head))
	for range MaxLineBytes / len(chunk) {
		mustWrite(chunk)
	}
	mustWrite([]byte(tail))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	err = loadErr(t, dir)
	want := name + ":2: line is longer than the limit of 67108864 bytes"
	if err.Error() != want {
		t.Errorf("Load error = %q\nwant %q", err, want)
	}
}

// TestLineAtLimit checks that a line of exactly MaxLineBytes bytes, not
// counting its line ending, is read, and one byte more is refused. It drives
// the line reader directly: decoding has no length limit of its own.
func TestLineAtLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		eol  string
		size int
	}{{"\r\n", MaxLineBytes}, {"", MaxLineBytes}, {"\n", MaxLineBytes + 1}}
	for _, tc := range cases {
		next := tc.eol + "{}\n"
		if tc.eol == "" {
			next = "" // the last line of the file, without a line ending
		}
		var l lineReader
		l.reset(io.MultiReader(io.LimitReader(repeatReader('a'), int64(tc.size)), strings.NewReader(next)), EventsFile, -1)
		line, n, err := l.next()
		if tc.size > MaxLineBytes {
			want := "events.jsonl:1: line is longer than the limit of 67108864 bytes"
			if err == nil || err.Error() != want {
				t.Errorf("line ending %q: %d-byte line: err = %v, want %q", tc.eol, tc.size, err, want)
			}
			continue
		}
		if err != nil || n != 1 || len(line) != tc.size {
			t.Errorf("line ending %q: %d-byte line: n=%d, %d bytes, %v", tc.eol, tc.size, n, len(line), err)
		}
		if tc.eol != "" {
			if line, n, err := l.next(); err != nil || n != 2 || string(line) != "{}" {
				t.Errorf("line ending %q: next line = %q, %d, %v", tc.eol, line, n, err)
			}
		}
	}
}

// repeatReader returns a reader of an endless run of one byte.
func repeatReader(b byte) io.Reader { return &repeated{chunk: bytes.Repeat([]byte{b}, 64<<10)} }

type repeated struct{ chunk []byte }

func (r *repeated) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], r.chunk)
	}
	return n, nil
}

func TestBadManifest(t *testing.T) {
	t.Parallel()
	valid := func(t *testing.T, dir string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	edit := func(old, new string) func(t *testing.T, dir string) string {
		return func(t *testing.T, dir string) string {
			m := valid(t, dir)
			if !strings.Contains(m, old) {
				t.Fatalf("%q not in manifest.json", old)
			}
			return strings.Replace(m, old, new, 1)
		}
	}
	fixed := func(s string) func(*testing.T, string) string { return func(*testing.T, string) string { return s } }
	cases := []struct {
		name     string
		manifest func(t *testing.T, dir string) string
		want     string // after "<path>/manifest.json: "
	}{
		{"not JSON", fixed("{"), "invalid JSON"},
		{"empty file", fixed(""), "invalid JSON"},
		{"array", fixed("[1, 2]"), "invalid manifest: expected object, got array"},
		{"NaN", edit(`"cost_usd": null`, `"cost_usd": NaN`), "invalid JSON"},
		{"schema 9.9", edit(`"schema_version": "0.1"`, `"schema_version": "9.9"`), "unsupported schema version '9.9'"},
		{"schema missing", edit(`"schema_version": "0.1",`, ``), "unsupported schema version None"},
		{"schema as number", edit(`"schema_version": "0.1"`, `"schema_version": 0.1`), "unsupported schema version 0.1"},
		{"format", edit(`"format": "stepfork"`, `"format": "other"`), "invalid manifest: format must be 'stepfork'"},
		{"agent_name 5", edit(`"agent_name": "bad"`, `"agent_name": 5`), "invalid manifest: agent_name must be a non-empty string"},
		{"empty agent_name", edit(`"agent_name": "bad"`, `"agent_name": ""`), "invalid manifest: agent_name must be a non-empty string"},
		{"empty run_id", edit(`"run_id": "run_bad"`, `"run_id": ""`), "invalid manifest: run_id must be a non-empty string"},
		{"missing run_id", edit(`"run_id": "run_bad",`, ``), "invalid manifest: run_id is required"},
		{"unknown key", edit(`"status"`, `"extra": 1, "status"`), `invalid manifest: unknown field "extra"`},
		{"unknown totals key", edit(`"events": 4`, `"events": 4, "x": 1`), `invalid manifest: unknown field totals.x`},
		{"unknown environment key", edit(`"os": null`, `"os": null, "arch": null`), `invalid manifest: unknown field environment.arch`},
		{"naive created_at", edit(`"2026-01-01T00:00:00Z"`, `"2026-01-01T00:00:00"`), "invalid manifest: created_at must be timezone-aware"},
		{"unknown status", edit(`"completed"`, `"done"`), `invalid manifest: status "done"`},
		{"failed without failure", edit(`"completed"`, `"failed"`), "invalid manifest: failure is required when status is failed"},
		{"failure without failed", edit(`"failure": null`, `"failure": {"type": "E", "message": "m", "step": 1}`), "invalid manifest: failure must be omitted unless status is failed"},
		{"failure step as string", edit(`"completed",
  "failure": null`, `"failed",
  "failure": {"type": "E", "message": "m", "step": "1"}`), "invalid manifest: failure.step must be an integer"},
		{"negative events", edit(`"events": 4`, `"events": -1`), "invalid manifest: totals.events must be >= 0"},
		{"negative cost", edit(`"cost_usd": null`, `"cost_usd": -0.01`), "invalid manifest: totals.cost_usd must be a non-negative number or null"},
		{"negative duration", edit(`"duration_ms": null`, `"duration_ms": -1`), "invalid manifest: totals.duration_ms must be >= 0"},
		{"events as string", edit(`"events": 4`, `"events": "4"`), "invalid manifest: totals.events must be an integer"},
		{"BOM", func(t *testing.T, dir string) string { return "\ufeff" + valid(t, dir) }, "invalid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := savedBundle(t)
			writeBundleFile(t, dir, ManifestFile, tc.manifest(t, dir))
			err := loadErr(t, dir)
			want := filepath.Join(dir, ManifestFile) + ": " + tc.want
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Load error = %q\nwant prefix  %q", err, want)
			}
		})
	}
}

func TestBadRedactions(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, content, want string }{
		{"not JSON", "{", "invalid JSON"},
		{"number", "42", "invalid redactions object"},
		{"list", "[]", "invalid redactions object"},
		{"schema 9.9", `{"schema_version": "9.9", "entries": []}`, "unsupported redactions schema version '9.9'"},
		{"schema missing", `{"entries": []}`, "unsupported redactions schema version None"},
		{"entries bad", `{"schema_version": "0.1", "entries": "bad"}`, "invalid redactions metadata"},
		{"unknown key", `{"schema_version": "0.1", "entries": [], "x": 1}`, "invalid redactions metadata"},
		{"entry unknown key", `{"schema_version": "0.1", "entries": [{"event_id": "e", "path": "/a", "reason": "r", "replacement": "[REDACTED]", "secret": "x"}]}`, "invalid redactions metadata"},
		{"entry missing path", `{"schema_version": "0.1", "entries": [{"event_id": "e", "reason": "r", "replacement": "[REDACTED]"}]}`, "invalid redactions metadata"},
		{"entry wrong replacement", `{"schema_version": "0.1", "entries": [{"event_id": "e", "path": "/a", "reason": "r", "replacement": "***"}]}`, "invalid redactions metadata"},
		{"entry not an object", `{"schema_version": "0.1", "entries": [1]}`, "invalid redactions metadata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := savedBundle(t)
			writeBundleFile(t, dir, RedactionsFile, tc.content)
			err := loadErr(t, dir)
			want := filepath.Join(dir, RedactionsFile) + ": " + tc.want
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Load error = %q\nwant prefix  %q", err, want)
			}
		})
	}
}

func TestBadIntegrityFile(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, content, want string }{
		{"unknown key", `{"schema_version": "0.1", "algorithm": "sha256", "files": {}, "x": 1}`, "integrity.json metadata is invalid."},
		{"schema 9.9", `{"schema_version": "9.9", "algorithm": "sha256", "files": {}}`, "integrity.json metadata is invalid."},
		{"not JSON", `{`, "integrity.json is not valid JSON."},
		{"NaN", `{"schema_version": "0.1", "algorithm": NaN, "files": {}}`, "integrity.json is not valid JSON."},
		{"files a list", `{"schema_version": "0.1", "algorithm": "sha256", "files": []}`, "integrity.json metadata is invalid."},
		{"md5", `{"schema_version": "0.1", "algorithm": "md5", "files": {}}`, "Unsupported integrity algorithm 'md5'."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := savedBundle(t)
			writeBundleFile(t, dir, IntegrityFile, tc.content)
			res := VerifyIntegrity(dir)
			if res.Status != IntegrityMismatch || len(res.Issues) == 0 || res.Issues[0].Message != tc.want {
				t.Errorf("VerifyIntegrity = %+v; want mismatch %q", res, tc.want)
			}
			// Load does not check integrity.json (as in Python).
			if _, err := Load(dir); err != nil {
				t.Errorf("Load: %v", err)
			}
		})
	}
}

func TestBadBundlePaths(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T) (path string, want string)
	}{
		{"wrong suffix", func(t *testing.T) (string, string) {
			p := filepath.Join(t.TempDir(), "run.trace")
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			return p, "trace bundle path must end with .sftrace: " + p
		}},
		{"missing bundle", func(t *testing.T) (string, string) {
			p := filepath.Join(t.TempDir(), "none.sftrace")
			return p, "missing required file: " + p
		}},
		{"file instead of a directory", func(t *testing.T) (string, string) {
			p := filepath.Join(t.TempDir(), "file.sftrace")
			writeBundleFile(t, filepath.Dir(p), filepath.Base(p), "{}")
			return p, p + " is not a directory"
		}},
		{"manifest.json is a directory", func(t *testing.T) (string, string) {
			dir := savedBundle(t)
			p := filepath.Join(dir, ManifestFile)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			return dir, "required path is not a file: " + p
		}},
		{"events.jsonl is a directory", func(t *testing.T) (string, string) {
			dir := savedBundle(t)
			p := filepath.Join(dir, EventsFile)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			return dir, "required path is not a file: " + p
		}},
		{"missing redactions.json", func(t *testing.T) (string, string) {
			dir := savedBundle(t)
			p := filepath.Join(dir, RedactionsFile)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			return dir, "missing required file: " + p
		}},
		{"missing manifest.json", func(t *testing.T) (string, string) {
			dir := savedBundle(t)
			p := filepath.Join(dir, ManifestFile)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			return dir, "missing required file: " + p
		}},
		{"missing events.jsonl", func(t *testing.T) (string, string) {
			dir := savedBundle(t)
			p := filepath.Join(dir, EventsFile)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			return dir, "missing required file: " + p
		}},
		{"symlink pointing outside", func(t *testing.T) (string, string) {
			dir := savedBundle(t)
			outside := filepath.Join(t.TempDir(), "events.jsonl")
			writeBundleFile(t, filepath.Dir(outside), filepath.Base(outside), goodLine+"\n")
			p := filepath.Join(dir, EventsFile)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
			return dir, p + " is a symbolic link that points outside the bundle"
		}},
		{"relative symlink pointing outside", func(t *testing.T) (string, string) {
			dir := savedBundle(t)
			writeBundleFile(t, filepath.Dir(dir), "stolen.json", `{"schema_version": "0.1", "entries": []}`)
			p := filepath.Join(dir, RedactionsFile)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../stolen.json", p); err != nil {
				t.Fatal(err)
			}
			return dir, p + " is a symbolic link that points outside the bundle"
		}},
		{"broken symlink", func(t *testing.T) (string, string) {
			dir := savedBundle(t)
			p := filepath.Join(dir, ManifestFile)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("nowhere.json", p); err != nil {
				t.Fatal(err)
			}
			return dir, p + ": broken symbolic link"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path, want := tc.setup(t)
			err := loadErr(t, path)
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Load error = %q\nwant prefix  %q", err, want)
			}
			if _, err := Open(path); err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Open error = %v\nwant prefix  %q", err, want)
			}
		})
	}
}

// TestSymlinkInsideBundle checks that a symbolic link to a file inside the
// bundle is followed, as Python follows it.
func TestSymlinkInsideBundle(t *testing.T) {
	t.Parallel()
	dir := savedBundle(t)
	want, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{EventsFile, ManifestFile} {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, "data", name)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatalf("Load with symlinks inside the bundle: %v", err)
	}
	if len(got.Events) != len(want.Events) || got.RunID != want.RunID {
		t.Errorf("loaded %d events of run %s, want %d of %s", len(got.Events), got.RunID, len(want.Events), want.RunID)
	}
	// The bundle directory itself may be reached through a symbolic link.
	link := filepath.Join(t.TempDir(), "link.sftrace")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(link); err != nil || len(got.Events) != len(want.Events) {
		t.Errorf("Load through a linked bundle directory: %v", err)
	}
}

// TestEmptyEventsFile checks that a 0-byte events.jsonl is a valid empty run.
func TestEmptyEventsFile(t *testing.T) {
	t.Parallel()
	dir := savedBundle(t)
	writeBundleFile(t, dir, EventsFile, "")
	tr, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Events) != 0 {
		t.Errorf("got %d events, want 0", len(tr.Events))
	}
	// A last line without its newline is still read.
	writeBundleFile(t, dir, EventsFile, goodLine)
	if tr, err = Load(dir); err != nil || len(tr.Events) != 1 {
		t.Errorf("unterminated last line: %v", err)
	}
}
