package trace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// vectorFiles returns the contents of the named file of every shared test
// vector bundle; it fails when the vectors are missing, so that fuzz targets
// never silently run without their seeds.
func vectorFiles(f *testing.F, name string) [][]byte {
	f.Helper()
	var out [][]byte
	for _, dir := range vectorBundles(f) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) && name == IntegrityFile {
			continue // the legacy bundle has none
		}
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// vectorLines returns every line of every shared events.jsonl, without the
// newline.
func vectorLines(f *testing.F) [][]byte {
	f.Helper()
	var lines [][]byte
	for _, data := range vectorFiles(f, EventsFile) {
		for line := range bytes.Lines(data) {
			lines = append(lines, bytes.TrimSuffix(line, []byte("\n")))
		}
	}
	if len(lines) < 2000 {
		f.Fatalf("only %d seed lines; the 1000-call recording is missing", len(lines))
	}
	return lines
}

// writtenForm is ev as appendEvent writes it and a decoder then reads it back:
// absent payloads of the type become null and a missing redactions list an
// empty one.
func writtenForm(ev Event) Event {
	ev = ev.Clone()
	if ev.Redactions == nil {
		ev.Redactions = []string{}
	}
	for _, p := range []*Value{&ev.Input, &ev.Output, &ev.Before, &ev.After, &ev.Details} {
		if p.IsAbsent() && fieldIn(payloadField(p, &ev), typeFields[ev.Type]) {
			*p = NullValue
		}
	}
	return ev
}

// FuzzEventLine decodes one line of events.jsonl. A line that decodes must
// re-encode (appendEvent) to a line that decodes to the same event, with the
// same canonical payloads and payload hashes, and re-encoding is then a fixed
// point. A line that does not decode must give a JSON or event error.
func FuzzEventLine(f *testing.F) {
	for _, line := range vectorLines(f) {
		f.Add(line)
	}
	for _, s := range []string{goodLine, "", "{}", `{"type":"run_end"}`, "\ufeff{}", `{"cost_usd":1e999}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var d eventDecoder
		var ev Event
		err := d.decode(line, &ev)
		if err != nil {
			var ce *CanonicalError
			if !errors.As(err, &ce) && !errors.Is(err, errInvalidEvent) {
				t.Fatalf("error %v (%T) is neither a JSON nor an event error", err, err)
			}
			// The line-level wrapper never panics either and keeps the line.
			lerr := d.decodeLine(line, 7, EventsFile, &ev)
			var le *LineError
			if !errors.As(lerr, &le) || le.Line != 7 || !strings.HasPrefix(lerr.Error(), "events.jsonl:7: ") {
				t.Fatalf("decodeLine error = %v", lerr)
			}
			return
		}
		// A decoder that hashes every payload as it reads it (sumPayloads)
		// decodes the same event, and its digests say whether the stored
		// hashes are the payloads' as ExpectedHashes does.
		var sd eventDecoder
		sd.sum = true
		var sev Event
		if err := sd.decode(line, &sev); err != nil || !reflect.DeepEqual(sev, ev) {
			t.Fatalf("a summing decoder gives %v, %+v; want %+v", err, sev, ev)
		}
		ein, eout := ev.ExpectedHashes()
		if got, want := (&payloadSums{in: sd.sums[0], out: sd.sums[1]}).stored(&ev), ein == ev.InputHash && eout == ev.OutputHash; got != want {
			t.Fatalf("the digests say the stored hashes are right: %v; ExpectedHashes: %v (%q %q, stored %q %q)", got, want, ein, eout, ev.InputHash, ev.OutputHash)
		}
		want := writtenForm(ev)
		out := appendEvent(nil, &ev)
		if !utf8.Valid(out) || bytes.ContainsAny(out, "\n\r") {
			t.Fatalf("encoded line is not one line of UTF-8: %q", out)
		}
		var got Event
		if err := d.decode(out, &got); err != nil {
			t.Fatalf("re-encoded line does not decode: %v\nin:  %q\nout: %q", err, line, out)
		}
		if !got.Timestamp.Equal(want.Timestamp) {
			t.Fatalf("timestamp %v became %v", want.Timestamp, got.Timestamp)
		}
		_, wantOff := want.Timestamp.Zone()
		_, gotOff := got.Timestamp.Zone()
		if wantOff != gotOff {
			t.Fatalf("timestamp offset %d became %d", wantOff, gotOff)
		}
		got.Timestamp = want.Timestamp
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip changed the event\nin:   %q\nout:  %q\nwant: %+v\ngot:  %+v", line, out, want, got)
		}
		for _, p := range [][2]Value{{ev.Input, got.Input}, {ev.Output, got.Output}, {ev.Before, got.Before}, {ev.After, got.After}, {ev.Details, got.Details}} {
			if !p[0].IsAbsent() && Hash(p[0]) != Hash(p[1]) {
				t.Fatalf("payload %s changed its hash to that of %s", p[0], p[1])
			}
		}
		wi, wo := want.ExpectedHashes()
		gi, gotO := got.ExpectedHashes()
		if wi != gi || wo != gotO {
			t.Fatalf("expected hashes changed")
		}
		if again := appendEvent(nil, &got); !bytes.Equal(again, out) {
			t.Fatalf("encoding is not a fixed point:\n%q\n%q", out, again)
		}
	})
}

// FuzzCanonicalize checks canonicalize: it never panics, its output is a
// fixed point, valid JSON, and means what the input meant; it accepts nothing
// that encoding/json refuses and refuses valid JSON only for the reasons it
// documents.
func FuzzCanonicalize(f *testing.F) {
	for _, line := range vectorLines(f) {
		f.Add(line)
	}
	for _, name := range []string{ManifestFile, RedactionsFile, IntegrityFile} {
		for _, data := range vectorFiles(f, name) {
			f.Add(data)
		}
	}
	for _, s := range []string{"0.0", "-0.0", "1e-05", "0.00001", "1e-7", "1.5e-7", "123456.789", "1e15", "1e16", "2.5e15",
		"1e21", "1.7976931348623157e+308", "5e-324", "0.30000000000000004", "1.2345678901234568e+17", "-0", "1E2",
		`{"b":2,"a":1}`, `{"E":3,"e":2,"é":1}`, `"\u2028\u007f<>&/"`, `"\ud83d\ude00"`, `"\ud800"`, `[1.0,1]`,
		`{"a":1,"a":2}`, "NaN", "-Infinity", " \t\r\n null \n", "1e999", "123456789012345678901234567890"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := canonicalize(data)
		valid := json.Valid(data)
		if err != nil {
			if !errors.Is(err, ErrCanonical) {
				t.Fatalf("error %v does not match ErrCanonical", err)
			}
			if valid && !documentedRefusal(data) {
				t.Fatalf("encoding/json accepts %q but canonicalize refuses it: %v", data, err)
			}
			return
		}
		if !valid {
			t.Fatalf("canonicalize accepts %q, which encoding/json refuses; out %q", data, out)
		}
		again, err := canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: %q -> %q -> %q (%v)", data, out, again, err)
		}
		v, err := ParseValue(data)
		if err != nil || v.Canonical() != string(out) {
			t.Fatalf("ParseValue disagrees with canonicalize: %v", err)
		}
		// Decode into a *Value stores v itself; encoding/json must agree.
		var viaJSON, viaDecode Value
		if err := json.Unmarshal(out, &viaJSON); err != nil || viaJSON != v {
			t.Fatalf("json.Unmarshal of %q into a Value: %q, %v", out, viaJSON.Canonical(), err)
		}
		if err := v.Decode(&viaDecode); err != nil || viaDecode != v {
			t.Fatalf("Decode of %q into a Value: %q, %v", out, viaDecode.Canonical(), err)
		}
		// Same meaning: both decode to the same Go value (numbers as
		// float64, so 1 and 1.0 compare equal here).
		var a, b any
		if json.Unmarshal(data, &a) != nil {
			return // a number out of float64 range: encoding/json gives up
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("output does not unmarshal: %v", err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed:\nin:  %q\nout: %q", data, out)
		}
	})
}

// documentedRefusal reports whether valid JSON data holds something that
// canonicalize refuses on purpose: duplicate keys, a lone surrogate escape,
// invalid UTF-8, nesting deeper than MaxDepth or a float out of range.
func documentedRefusal(data []byte) bool {
	if !utf8.Valid(data) || bytes.Contains(data, []byte(`\u`)) || bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) > MaxDepth {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var dup bool
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				if seen[k.(string)] {
					dup = true
				}
				seen[k.(string)] = true
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for dec.More() {
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		if n, ok := tok.(json.Number); ok {
			if _, err := n.Float64(); err != nil && strings.ContainsAny(string(n), ".eE") {
				dup = true // float out of range
			}
		}
		return nil
	}
	if err := walk(); err != nil {
		return false
	}
	return dup
}

// FuzzValueOps checks the accessors of Values parsed from arbitrary JSON:
// Members and Elems take a value apart and ObjectValue and ArrayValue put it
// back together, Get finds every member, Any and ValueOf agree, and
// redaction is idempotent and never leaves a credential pattern behind.
func FuzzValueOps(f *testing.F) {
	for _, line := range vectorLines(f)[:200] {
		f.Add(line)
	}
	for _, s := range []string{`{"api_key":"x","a":[{"password":1},"Bearer abcdefghij"]}`, `["sk-abcdefghijkl"]`,
		`{"a~b/c":{"token":"ghp_abcdefghijk"}}`, `{"\u0000":1,"é":[1.5,-0.0,1e300]}`, `"Authorization: Bearer   abc.def-ghi"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseValue(data)
		if err != nil {
			return
		}
		checkValueOps(t, v, 0)
		if back, err := ValueOf(v.Any()); err != nil || back != v {
			t.Fatalf("ValueOf(Any()) = %s, %v; want %s", back, err, v)
		}
		d := json.NewDecoder(strings.NewReader(v.Canonical()))
		d.UseNumber()
		var viaJSON any
		if err := d.Decode(&viaJSON); err != nil || !reflect.DeepEqual(v.Any(), viaJSON) {
			t.Fatalf("Any() = %#v, encoding/json with UseNumber %#v (%v)", v.Any(), viaJSON, err)
		}
		r1, f1 := RedactValue(v)
		r2, f2 := RedactValue(r1)
		if r2 != r1 || len(f2) != 0 {
			t.Fatalf("redaction is not idempotent: %s -> %s -> %s (%v)", v, r1, r2, f2)
		}
		if (len(f1) == 0) != (r1 == v) {
			t.Fatalf("findings %v but value changed=%v", f1, r1 != v)
		}
		if _, err := canonicalize([]byte(r1.Canonical())); err != nil {
			t.Fatalf("redacted value is not canonical: %v", err)
		}
		checkNoSensitiveKey(t, r1)
	})
}

// pySensitiveKey is Python stepfork's sensitive-key rule written out
// plainly, as an oracle for IsSensitiveKey and its fast filters.
func pySensitiveKey(key string) bool {
	var b strings.Builder
	for _, r := range strings.ToLower(key) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	switch b.String() {
	case "apikey", "accesstoken", "refreshtoken", "authtoken", "authorization", "password", "passwd",
		"secret", "clientsecret", "privatekey", "sessiontoken", "bearertoken":
		return true
	}
	return false
}

// checkNoSensitiveKey fails when a sensitive key of v holds anything but
// "[REDACTED]".
func checkNoSensitiveKey(t *testing.T, v Value) {
	t.Helper()
	for k, m := range v.Members() {
		if IsSensitiveKey(k) != pySensitiveKey(k) {
			t.Fatalf("IsSensitiveKey(%q) = %v, Python says %v", k, IsSensitiveKey(k), pySensitiveKey(k))
		}
		if pySensitiveKey(k) && m != StringValue(Redacted) {
			t.Fatalf("sensitive key %q kept its value %s", k, m)
		}
		checkNoSensitiveKey(t, m)
	}
	for _, e := range v.Elems() {
		checkNoSensitiveKey(t, e)
	}
}

func checkValueOps(t *testing.T, v Value, depth int) {
	t.Helper()
	if depth > 20 {
		return
	}
	switch v.Kind() {
	case Object:
		var ms []Member
		prev := ""
		for k, m := range v.Members() {
			if len(ms) > 0 && k <= prev {
				t.Fatalf("members out of order: %q after %q", k, prev)
			}
			prev = k
			if got := v.Get(k); got != m {
				t.Fatalf("Get(%q) = %s, want %s", k, got, m)
			}
			checkValueOps(t, m, depth+1)
			ms = append(ms, Member{k, m})
		}
		if back, err := ObjectValue(ms...); err != nil || back != v {
			t.Fatalf("ObjectValue(Members()) = %s, %v; want %s", back, err, v)
		}
		if v.Len() != len(ms) {
			t.Fatalf("Len = %d, want %d", v.Len(), len(ms))
		}
	case Array:
		var es []Value
		for i, e := range v.Elems() {
			if i != len(es) {
				t.Fatalf("index %d, want %d", i, len(es))
			}
			checkValueOps(t, e, depth+1)
			es = append(es, e)
		}
		if back, err := ArrayValue(es...); err != nil || back != v {
			t.Fatalf("ArrayValue(Elems()) = %s, %v; want %s", back, err, v)
		}
		if v.Len() != len(es) {
			t.Fatalf("Len = %d, want %d", v.Len(), len(es))
		}
	case String:
		s, ok := v.Str()
		if !ok || StringValue(s) != v {
			t.Fatalf("StringValue(Str()) = %s, want %s", StringValue(s), v)
		}
	case Int:
		if i, ok := v.Int(); ok && IntValue(i) != v {
			t.Fatalf("IntValue(Int()) = %s, want %s", IntValue(i), v)
		}
	case Float:
		x, ok := v.Float()
		if !ok {
			t.Fatalf("Float() of %s failed", v)
		}
		if back, err := FloatValue(x); err != nil || back != v {
			t.Fatalf("FloatValue(Float()) = %s, %v; want %s", back, err, v)
		}
	case Bool:
		b, ok := v.BoolOf()
		if !ok || BoolValue(b) != v {
			t.Fatalf("BoolValue(BoolOf()) wrong for %s", v)
		}
	case Null:
	default:
		t.Fatalf("parsed value has kind %s", v.Kind())
	}
}

// FuzzEventsFile reads arbitrary bytes as a whole events.jsonl the way Open
// does: line splitting (LF, CRLF, a BOM, blank lines, a last line without a
// newline) and decoding. It never panics; every error is a *LineError whose
// line exists; a file read to the end has the digest of its bytes, and its
// events re-encode to a file that reads back the same.
func FuzzEventsFile(f *testing.F) {
	for _, data := range vectorFiles(f, EventsFile) {
		if len(data) < 1<<16 {
			f.Add(data)
		}
	}
	for _, s := range []string{"", "\n", "\n\n", goodLine, goodLine + "\r\n" + goodLine, goodLine + "\r" + goodLine + "\n",
		"\ufeff" + goodLine + "\n", goodLine + "\n \n", goodLine + "\r\n\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := readEventsFile(data)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.File != EventsFile || le.Line < 1 || le.Line > bytes.Count(data, []byte("\n"))+1 {
				t.Fatalf("error %v (%T) does not name an existing line", err, err)
			}
			return
		}
		var out []byte
		for i := range events {
			out = appendEvent(out, &events[i])
			out = append(out, '\n')
		}
		back, err := readEventsFile(out)
		if err != nil || len(back) != len(events) {
			t.Fatalf("re-encoded file: %d events, %v; want %d", len(back), err, len(events))
		}
		for i := range back {
			if a, b := appendEvent(nil, &events[i]), appendEvent(nil, &back[i]); !bytes.Equal(a, b) {
				t.Fatalf("event %d changed:\n%s\n%s", i, a, b)
			}
		}
	})
}

// readEventsFile reads data as events.jsonl, checking the digest of the bytes
// read along the way.
func readEventsFile(data []byte) ([]Event, error) {
	var l lineReader
	var d eventDecoder
	l.reset(bytes.NewReader(data), EventsFile, int64(len(data)))
	var events []Event
	for {
		line, n, err := l.next()
		if err == io.EOF {
			break
		}
		var ev Event
		if err == nil {
			err = d.decodeLine(line, n, EventsFile, &ev)
		}
		if err != nil {
			return nil, err
		}
		events = append(events, ev.Clone())
	}
	if sum := sha256.Sum256(data); l.digest() != hex.EncodeToString(sum[:]) {
		return nil, errors.New("digest of the bytes read differs from the digest of the file")
	}
	return events, nil
}
