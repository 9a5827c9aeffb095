package trace

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// checkSavedValue compares savedValue on in (the value at offset 0) with
// the canonicalizer, and reports whether savedValue took it. What it takes
// must be a value the canonicalizer reads to the same end, with the same
// canonical bytes (so the same payload hash) and the same verdict on
// sensitive keys, and whose text is the file form of those bytes; what it
// refuses must leave the cursor and the verdict alone.
func checkSavedValue(t testing.TB, in []byte) bool {
	t.Helper()
	fast := canonicalizer{in: in, checkKeys: true, noteBehaviorKeys: true}
	canon, built, ok := fast.savedValue(nil)
	// Again, with what the first scan remembered (its last float).
	again := canonicalizer{in: in, checkKeys: true, floatMemo: fast.floatMemo}
	if canon2, built2, ok2 := again.savedValue(nil); ok2 != ok || built2 != built || !bytes.Equal(canon2, canon) || again.pos != fast.pos {
		t.Fatalf("savedValue(%q) a second time gives %q, %v, %v; the first time %q, %v, %v", in, canon2, built2, ok2, canon, built, ok)
	}
	if !ok {
		if fast.pos != 0 || fast.sensitive {
			t.Fatalf("savedValue(%q) refused it but moved the cursor to %d (sensitive %v)", in, fast.pos, fast.sensitive)
		}
		return false
	}
	slow := canonicalizer{in: in, checkKeys: true}
	err := slow.value()
	if err != nil {
		t.Fatalf("savedValue(%q) took what the canonicalizer refuses: %v", in, err)
	}
	if slow.pos != fast.pos {
		t.Fatalf("savedValue(%q) ended at %d, the canonicalizer at %d", in, fast.pos, slow.pos)
	}
	if !bytes.Equal(canon, slow.out) {
		t.Fatalf("savedValue(%q) = %q, the canonicalizer gives %q", in, canon, slow.out)
	}
	if sha256.Sum256(canon) != sha256.Sum256(slow.out) {
		t.Fatal("unreachable: equal bytes, different digests")
	}
	if fast.sensitive != slow.sensitive {
		t.Fatalf("savedValue(%q): sensitive %v, the canonicalizer says %v", in, fast.sensitive, slow.sensitive)
	}
	// A payload without the keys that ReadBehavior's digests must not
	// stand for is its own behavior (see elide).
	if v := (Value{string(canon)}); !fast.behaviorKey && (httpBehavior(v) != v || withoutUsage(v) != v) {
		t.Fatalf("savedValue(%q) noted no key that behavior leaves out, but its behavior is %q, without usage %q", in, httpBehavior(v).raw, withoutUsage(v).raw)
	} else if fast.behaviorKey && !partialBehavior(canon) {
		t.Fatalf("savedValue(%q) noted a key that partialBehavior does not find", in)
	}
	raw := in[:fast.pos]
	if ff := appendFileForm(nil, Value{string(canon)}); !bytes.Equal(ff, raw) {
		t.Fatalf("savedValue took %q, which is not the file form %q of its canonical bytes", raw, ff)
	}
	if built != !bytes.Equal(canon, raw) {
		t.Fatalf("savedValue(%q): built %v, but the canonical bytes are %q", in, built, canon)
	}
	return true
}

func TestSavedValueMatchesCanonicalizer(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	tooDeep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	deepObj := strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth)
	tests := []struct {
		name string
		in   string
		fast bool // savedValue takes it
	}{
		{"empty object", `{}`, true},
		{"empty array", `[]`, true},
		{"sorted keys", `{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, true},
		{"key order", `{"b":1,"a":2}`, false},
		{"nested key order", `{"a":{"y":1,"x":2}}`, false},
		{"duplicate keys", `{"a":1,"a":2}`, false},
		{"duplicate keys apart", `{"a":1,"b":2,"a":3}`, false},
		{"key prefix order", `{"a":1,"ab":2,"b":3}`, true},
		{"non-ASCII key order", `{"z":1,"é":2,"😀":3}`, true},
		{"non-ASCII keys unsorted", `{"é":1,"z":2}`, false},
		{"escaped key", `{"a\"b":1}`, false},
		{"unicode-escaped key", `{"\u00e9":1}`, false},
		{"raw UTF-8", `"générée — ☃ 😀 東京"`, true},
		{"escaped non-ASCII", `"\u00e9"`, false},
		{"escaped surrogate pair", `"\ud83d\ude00"`, false},
		{"lone surrogate", `"\ud83d"`, false},
		{"lone low surrogate", `"\ude00 x"`, false},
		{"raw surrogate bytes", "\"\xed\xa0\x80\"", false},
		{"invalid UTF-8", "\"a\xffb\"", false},
		{"truncated UTF-8", "\"a\xc3\"", false},
		{"overlong UTF-8", "\"\xc0\xaf\"", false},
		{"invalid UTF-8 in key", "{\"\xff\":1}", false},
		{"U+2028 and DEL raw", "\"\u2028\u2029\x7f\"", true},
		{"UTF-8 across eight-byte words", `"1234567é12345678😀1234567東京 and more than sixteen bytes of plain text"`, true},
		{"UTF-8 before a quote and an escape", `{"aé":"é\n😀"}`, true},
		{"UTF-8 after an escape", `"\t東"`, true},
		{"invalid UTF-8 late in a long string", "\"" + strings.Repeat("a", 40) + "é\xe6\x97\"", false},
		{"cut UTF-8 at the end of input", "\"abcdefgh\xf0\x9f\x98", false},
		{"beyond U+10FFFF", "\"\xf4\x90\x80\x80\"", false},
		{"five-byte lead", "\"\xf8\x88\x80\x80\x80\"", false},
		{"continuation byte alone", "\"abcdefghij\x80\"", false},
		{"invalid UTF-8 in an array's second string", "[\"é\",\"\xc3\x28\"]", false},
		{"short escapes", `"q\" b\\ n\n r\r t\t b\b f\f"`, true},
		{"control escape", `"\u0000\u001f\u0001"`, true},
		{"uppercase control escape", `"\u001F"`, false},
		{"long form of a short escape", `"\u000a"`, false},
		{"escaped slash", `"a\/b"`, false},
		{"escaped printable", `"\u0041"`, false},
		{"raw control character", "\"a\x01b\"", false},
		{"raw newline", "\"a\nb\"", false},
		{"bad escape", `"\x"`, false},
		{"unterminated string", `"abc`, false},
		{"unterminated escape", `"abc\`, false},
		{"integers", `[0,-1,12345678901234567890123456789,-98765432109876543210]`, true},
		{"minus zero", `-0`, false},
		{"minus zero in array", `[1,-0]`, false},
		{"leading zero", `01`, true}, // the value is 0; what follows is the caller's
		{"float", `[1.5,-0.25,0.61,450.5,100.0,-0.0,0.0]`, true},
		{"float with trailing zero", `1.50`, false},
		{"1.0 vs 1", `[1.0,1]`, true},
		{"exponent for an integer-valued float", `1e5`, false},
		{"100000 as float", `100000.0`, true},
		{"huge float", `1e+16`, true},
		{"huge float without sign", `1e16`, false},
		{"1e22", `1e+22`, true},
		{"plain 16 digits", `1000000000000000.0`, true},
		{"Pydantic small float", `0.00001`, true},
		{"repr small float", `1e-05`, false},
		{"Pydantic tiny float", `1e-7`, true},
		{"repr tiny float", `1e-07`, false},
		{"Pydantic tiny float, mantissa", `-1.5e-7`, true},
		{"small floats in a payload", `{"a":[0.00001,0.0001,1e-7],"b":"1e-05 e- in a string","c":0.5}`, true},
		{"0.0001", `0.0001`, true},
		{"uppercase exponent", `1E+16`, false},
		{"17 significant digits", `0.30000000000000004`, true},
		{"more digits than round trip", `0.300000000000000044`, false},
		{"overflow", `1e999`, false},
		{"underflow", `1e-400`, false},
		{"NaN", `NaN`, false},
		{"Infinity", `-Infinity`, false},
		{"literals", `[true,false,null]`, true},
		{"bad literal", `nul`, false},
		{"white space", `{"a": 1}`, false},
		{"white space in array", `[1, 2]`, false},
		{"leading white space", ` 1`, false},
		{"trailing comma", `[1,]`, false},
		{"missing colon", `{"a" 1}`, false},
		{"non-string key", `{1:2}`, false},
		{"deep", deep, true},
		{"deep objects", deepObj, true},
		{"too deep", tooDeep, false},
		{"sensitive key", `{"api_key":"x","b":1}`, true},
		{"sensitive key, other case", `{"Authorization":"x"}`, true},
		{"sensitive key below", `{"a":{"password":"hunter2"}}`, true},
		{"secret glued to a word", `{"note":"tokensk-abcdefghijklmnop"}`, true},
		{"bearer in text", `"Authorization: Bearer abcdefghijklmnop"`, true},
		{"empty", ``, false},
		{"many small floats", "[" + strings.Repeat("0.00001,", maxFloatFixes) + "0.00001]", false},
		{"value then more", `{"a":1},{"b":2}`, true},
		{"an HTTP response", `{"body":"x","headers":{"a":"b"},"ids":["r1"],"status":200}`, true},
		{"a model's usage, deep", `{"choices":[{"message":"hi"}],"meta":{"usage":{"total_tokens":3}}}`, true},
		{"usage as a value, not a key", `{"kind":"usage_report","note":"headers:"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := checkSavedValue(t, []byte(tt.in)); got != tt.fast {
				t.Errorf("savedValue(%q) took it: %v, want %v", tt.in, got, tt.fast)
			}
		})
	}
}

// TestSavedValueOfVectors checks that the payloads of every line of the
// shared test vectors take the fast path (they are in saved form: Python
// stepfork wrote them) and that decoding each line with and without it
// gives the same event, payload digests and saved-form verdict, in every
// mode of the decoder.
func TestSavedValueOfVectors(t *testing.T) {
	t.Parallel()
	lines := vectorLinesT(t)
	modes := []struct {
		name string
		set  func(d *eventDecoder)
	}{
		{"full", func(*eventDecoder) {}},
		{"hash-only", func(d *eventDecoder) { d.hashOnly = true }},
		{"track", func(d *eventDecoder) { d.track = true }},
		{"digest", func(d *eventDecoder) { d.hashOnly, d.digest = true, true }},
	}
	scanned := 0
	for _, m := range modes {
		var fast, slow eventDecoder
		m.set(&fast)
		m.set(&slow)
		slow.noScan = true
		for n, line := range lines {
			var fe, se Event
			ferr, serr := fast.decode(line, &fe), slow.decode(line, &se)
			if (ferr == nil) != (serr == nil) || ferr != nil && ferr.Error() != serr.Error() {
				t.Fatalf("%s, line %d: errors differ: %v vs %v", m.name, n, ferr, serr)
			}
			if !eventsEqual(fe, se) {
				t.Fatalf("%s, line %d: events differ:\n%+v\n%+v", m.name, n, fe, se)
			}
			if fast.sums != slow.sums || fast.exact != slow.exact || fast.spans != slow.spans ||
				fast.mayRedact != slow.mayRedact || fast.http != slow.http || fast.c.sensitive != slow.c.sensitive {
				t.Fatalf("%s, line %d: what the decoder noted differs", m.name, n)
			}
			if m.name == "track" && fast.savedForm(line, &fe) != slow.savedForm(line, &se) {
				t.Fatalf("%s, line %d: saved form differs", m.name, n)
			}
		}
	}
	// Every payload of the vectors is in saved form.
	for _, line := range lines {
		var d eventDecoder
		d.c.in = line
		for _, key := range []string{`"input":`, `"output":`, `"before":`, `"after":`, `"details":`} {
			i := bytes.Index(line, []byte(key))
			if i < 0 || bytes.HasPrefix(line[i+len(key):], []byte("null")) {
				continue
			}
			d.c.pos = i + len(key)
			if !checkSavedValue(t, line[d.c.pos:]) {
				t.Errorf("payload %s of %.120s… takes the slow path", key, line)
			}
			scanned++
		}
	}
	if scanned < 1000 {
		t.Fatalf("only %d payloads scanned", scanned)
	}
}

// eventsEqual compares two decoded events field by field.
func eventsEqual(a, b Event) bool {
	return a.ID == b.ID && a.RunID == b.RunID && a.ParentID == b.ParentID && a.Step == b.Step &&
		a.Type == b.Type && a.Timestamp.Equal(b.Timestamp) && a.Status == b.Status &&
		a.ReplayPolicy == b.ReplayPolicy && a.InputHash == b.InputHash && a.OutputHash == b.OutputHash &&
		a.Name == b.Name && a.Input == b.Input && a.Output == b.Output && a.Before == b.Before &&
		a.After == b.After && a.Details == b.Details && a.Message == b.Message
}

// FuzzSavedValue checks that savedValue takes only what the canonicalizer
// reads to the same canonical bytes, seeded with the payloads of the
// shared vectors and hostile values.
func FuzzSavedValue(f *testing.F) {
	for _, line := range vectorLines(f) {
		for _, key := range []string{`"input":`, `"output":`, `"details":`} {
			if i := bytes.Index(line, []byte(key)); i >= 0 {
				f.Add(line[i+len(key) : len(line)-1])
			}
		}
	}
	for _, s := range []string{`{"b":1,"a":2}`, `{"a":1,"a":2}`, `"\u00e9"`, "\"\xed\xa0\x80\"", `-0`, `1e5`, `1.0`,
		`12345678901234567890`, `0.00001`, `1e-05`, `1e-7`, `{"a": 1}`, `"\u001f\n"`, `{"api_key":"sk-abcdefgh12345678"}`,
		`[[[[[]]]]]`, `1e+16`, `1e16`, `"\ud83d\ude00"`,
		`{"body":"x","headers":{"a":"b"},"status":200}`, `{"a":{"usage":{"total_tokens":3}},"b":"usage"}`, `["usage_metadata",{"usageMetadata":null}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkSavedValue(t, in)
	})
}

// vectorLinesT is vectorLines for a test.
func vectorLinesT(t *testing.T) [][]byte {
	t.Helper()
	var lines [][]byte
	for _, dir := range vectorBundles(t) {
		data, err := os.ReadFile(filepath.Join(dir, EventsFile))
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(data) {
			lines = append(lines, bytes.TrimSuffix(line, []byte("\n")))
		}
	}
	if len(lines) < 2000 {
		t.Fatalf("only %d lines", len(lines))
	}
	return lines
}

// TestElideKeepsWholeEvents checks that an event that elide keeps whole
// (nothing of it can be left out) is exactly what a full decoding gives,
// whether its payloads were kept on the way or the line is decoded again:
// the shared vectors and hand-made lines, with usage, a credential, a
// sensitive key, an escaped hash and keys out of the saved order.
func TestElideKeepsWholeEvents(t *testing.T) {
	t.Parallel()
	lines := vectorLinesT(t)
	const head = `{"id":"evt_1","run_id":"run_1","parent_id":null,"step":1,"timestamp":"2026-11-30T07:20:15.775188Z","duration_ms":null,"status":"ok","replay_policy":"frozen",`
	h := `"` + strings.Repeat("ab", 32) + `"`
	for _, l := range []string{
		head + `"type":"llm_response","input_hash":null,"output_hash":` + h + `,"redactions":[],"model":"m","output":{"text":"hi","usage":{"prompt_tokens":3}},"prompt_tokens":null,"completion_tokens":null,"total_tokens":null,"cost_usd":0.5}`,
		head + `"type":"tool_call","input_hash":` + h + `,"output_hash":null,"redactions":[],"name":"t","input":{"note":"key sk-abcdefghijklmnop1234"}}`,
		head + `"type":"tool_call","input_hash":` + h + `,"output_hash":null,"redactions":[],"name":"t","input":{"password":"x"}}`,
		head + `"type":"tool_result","input_hash":null,"output_hash":"\u0061b","redactions":[],"name":"t","output":{"headers":{},"status":200}}`,
		head + `"input_hash":null,"output_hash":` + h + `,"redactions":[],"name":"t","output":{"headers":{},"status":200},"type":"tool_result"}`,
		head + `"type":"tool_result","input_hash":null,"output_hash":` + h + `,"redactions":[],"name":"t","output":{"b":1,"a":2}}`,
		head + `"type":"run_end","input_hash":null,"output_hash":` + h + `,"redactions":[],"run_status":"completed","output":{"x":0.00001}}`,
	} {
		lines = append(lines, []byte(l))
	}
	d := eventDecoder{hashOnly: true, digest: true}
	var full, ref eventDecoder
	whole := 0
	for n, line := range lines {
		var got, want Event
		sums, err := d.elide(line, n+1, "events.jsonl", &got, &full)
		werr := ref.decodeLine(line, n+1, "events.jsonl", &want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("line %d: elide error %v, full decoding %v", n+1, err, werr)
		}
		if err != nil || sums.in.ok || sums.out.ok {
			continue
		}
		whole++
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("line %d: elide kept\n%+v\nfull decoding gives\n%+v", n+1, got, want)
		}
	}
	if whole < 500 {
		t.Fatalf("only %d events kept whole", whole)
	}
}
