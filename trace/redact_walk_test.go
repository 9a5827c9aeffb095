package trace

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// redactValueRef is RedactValue as it was before the single descent (at
// 5f46962), kept word for word as the reference the descent must agree
// with bit for bit: the filter mayNeedRedaction over the whole value and
// again over every container before walking it, the key tests of
// IsSensitiveKey, every string decoded with Str.
func redactValueRef(v Value, scrub ...Scrubber) (Value, []Finding) {
	if v.IsAbsent() || len(scrub) == 0 && !mayNeedRedaction(v.raw) {
		return v, nil
	}
	var fs []Finding
	var path pointerPath
	out := redactWalkRef(v, &path, &fs, scrub)
	return out, fs
}

// mayNeedRedaction is the reference's filter over canonical text: a value
// that passes neither mayHoldCredentialJSON nor hasSensitiveAnchor has
// neither a sensitive key nor a credential. The descent has no such filter:
// it judges each string and key where it stands.
func mayNeedRedaction(s string) bool {
	return mayHoldCredentialJSON(s) || hasSensitiveAnchor(s) // a key=value secret holds a sensitive anchor
}

// hasSensitiveAnchor reports whether canonical JSON text, normalized as
// IsSensitiveKey normalizes a key (lowercased, escape sequences and every
// character but [a-z0-9] dropped), contains key, token, auth, passw or secret.
// Every sensitive key contains one of them once normalized, and a key's
// normalization is a substring of the text's, so text without them holds no
// sensitive key, even one spelled pass_word or se"cret.
func hasSensitiveAnchor(s string) bool {
	// w holds the last eight normalized characters, the newest in the low
	// byte; each anchor is compared with its low bytes at its last letter.
	const (
		key    = 'k'<<16 | 'e'<<8 | 'y'
		token  = 't'<<32 | 'o'<<24 | 'k'<<16 | 'e'<<8 | 'n'
		auth   = 'a'<<24 | 'u'<<16 | 't'<<8 | 'h'
		passw  = 'p'<<32 | 'a'<<24 | 's'<<16 | 's'<<8 | 'w'
		secret = 's'<<40 | 'e'<<32 | 'c'<<24 | 'r'<<16 | 'e'<<8 | 't'
	)
	var w uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c == '\\': // canonical escapes stand for '"', '\\' or control characters
			if i+1 < len(s) && s[i+1] == 'u' {
				i += 5
			} else {
				i++
			}
			continue
		case c == 0xe2 && strings.HasPrefix(s[i:], "\u212a"): // Kelvin sign: lowercases to k
			c, i = 'k', i+2
		case c == 0xc4 && strings.HasPrefix(s[i:], "\u0130"): // İ: lowercases to i
			c, i = 'i', i+1
		default:
			continue
		}
		w = w<<8 | uint64(c)
		switch c {
		case 'y':
			if w&0xffffff == key {
				return true
			}
		case 'n':
			if w&0xffffffffff == token {
				return true
			}
		case 'h':
			if w&0xffffffff == auth {
				return true
			}
		case 'w':
			if w&0xffffffffff == passw {
				return true
			}
		case 't':
			if w&0xffffffffffff == secret {
				return true
			}
		}
	}
	return false
}

func redactWalkRef(v Value, path *pointerPath, fs *[]Finding, scrub []Scrubber) Value {
	depth := len(*path)
	switch v.Kind() {
	case String:
		s, _ := v.Str()
		if r, reason := scrubString(s, scrub); reason != "" {
			*fs = append(*fs, Finding{path.pointer(), reason})
			return StringValue(r)
		}
		return v
	case Array:
		if len(scrub) == 0 && !mayNeedRedaction(v.raw) {
			return v
		}
		var elems []Value
		changed := false
		for i, e := range v.Elems() {
			*path = append((*path)[:depth], pathSegment{idx: i, arr: true})
			r := redactWalkRef(e, path, fs, scrub)
			if r != e && !changed {
				changed = true
				elems = make([]Value, 0, i+1)
				for j, x := range v.Elems() { // the elements before i, unchanged
					if j == i {
						break
					}
					elems = append(elems, x)
				}
			}
			if changed {
				elems = append(elems, r)
			}
		}
		*path = (*path)[:depth]
		if !changed {
			return v
		}
		out, _ := ArrayValue(elems...)
		return out
	case Object:
		if len(scrub) == 0 && !mayNeedRedaction(v.raw) {
			return v
		}
		var ms []Member
		changed := false
		n := 0
		for k, x := range v.Members() {
			key := k
			if len(scrub) > 0 || anchorMask(k) != 0 { // a key may hold a credential too
				if rk, reason := scrubString(k, scrub); reason != "" {
					// The member keeps its place under a redacted key,
					// made unique among the object's keys.
					key = uniqueKey(v, ms, rk)
					*path = append((*path)[:depth], pathSegment{key: key})
					*fs = append(*fs, Finding{path.pointer(), reason})
				}
			}
			*path = append((*path)[:depth], pathSegment{key: key})
			r := x
			if IsSensitiveKey(k) {
				if x != redactedValue {
					r = redactedValue
					*fs = append(*fs, Finding{path.pointer(), ReasonSensitiveKey})
				}
			} else {
				r = redactWalkRef(x, path, fs, scrub)
			}
			if (r != x || key != k) && !changed {
				changed = true
				ms = make([]Member, 0, n+1)
				for k2, x2 := range v.Members() { // the members before this one, unchanged
					if len(ms) == n {
						break
					}
					ms = append(ms, Member{k2, x2})
				}
			}
			if changed {
				ms = append(ms, Member{key, r})
			}
			n++
		}
		*path = (*path)[:depth]
		if !changed {
			return v
		}
		out, _ := ObjectValue(ms...)
		return out
	}
	return v
}

// pointerPath is the JSON Pointer of the value redactWalkRef is at.
type pointerPath []pathSegment

type pathSegment struct {
	key string // an object member's key, unescaped
	idx int    // an array element's index, when arr
	arr bool
}

func (p pointerPath) pointer() string {
	var b strings.Builder
	for _, seg := range p {
		b.WriteByte('/')
		if seg.arr {
			b.WriteString(strconv.Itoa(seg.idx))
		} else {
			b.WriteString(escapePointer(seg.key))
		}
	}
	return b.String()
}

// testScrubbers are scrubbers for the differential tests: one that
// replaces a word, and a pair that undo each other (a scrubber that
// reports a change and gives its input back changes nothing).
var testScrubbers = [][]Scrubber{
	nil,
	{func(s string) (string, bool) {
		r := strings.ReplaceAll(s, "dana", Redacted)
		return r, r != s
	}},
	{func(s string) (string, bool) {
		r := strings.ReplaceAll(s, "ab", "ba")
		return r, r != s
	}, func(s string) (string, bool) {
		r := strings.ReplaceAll(s, "ba", "ab")
		return r, r != s
	}},
}

// checkSameRedaction fails unless RedactValue and the reference give the
// same value (the same canonical text) and the same findings, in order.
func checkSameRedaction(t *testing.T, v Value) {
	t.Helper()
	for i, scrub := range testScrubbers {
		got, gotF := RedactValue(v, scrub...)
		want, wantF := redactValueRef(v, scrub...)
		if got.raw != want.raw || !reflect.DeepEqual(gotF, wantF) {
			t.Fatalf("scrubbers %d: RedactValue(%s)\n= %s %v\nreference %s %v", i, v.raw, got.raw, gotF, want.raw, wantF)
		}
	}
}

// hostileStrings are strings that hold credentials glued to words, after
// escapes, split by escapes, inside URLs and key=value text, and strings
// that hold only what the filters' anchors look for.
var hostileStrings = []string{
	"", "plain", "[REDACTED]", "sk-abcdefghijkl", "ask-proj-Zx81kQmW2vLp9TnB4cYd", "task-runner-service",
	"run_ghp_R2d2C3poBb8Ewok5Yoda9Luke", "9AKIAABCDEFGHIJKLMNOP", "\nghp_abcdefghijklmnop", "x\"ghp_abcdefghijkl\"",
	"Bearer abcdefghij", "p-Bearer AAAAAAAA/m-Bearer BBBBBBBB", "bearer\tabcdefghijk", "Authorization: Basic YWxpY2U6czNjcjN0",
	"Basic\tYWxpY2U6czNjcjN0", "Basic\x01YWxpY2U6czNjcjN0", "postgres://app:Pa55word@db:5432/x", "https://u:p\x01@host",
	"https://u:p\x0c@host", "https://u:p\"@host", "https://u:p\\@host", "root:pw@tcp(h:1)/d", "user:pw\x01@tcp(h)/db",
	"api_key=abc123!x", "api_key\x01=abc123!x", "api_key=\"abc123\"", "{\"password\": \"hunter2\"}", `{\"client_secret\":\"q9\"}`,
	"my password: hunter2", "my password:\thunter22!", "the secret: nobody knows", "AccountKey=c2VjcmV0;x",
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig", "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----",
	"xoxb-1234567890-abc", "AIzaSyA1234567890abcdefghijklmnopqrstu", "hf_abcdefghijklmnopqrstuvwxyz12345",
	"npm_abcdefghijklmnopqrstuvwxyz0123456789", "glpat-abcdefghijklmnopqrst", "sk_live_abcdefghij12",
	"max_tokens", "prompt_tokens: 12", "token", "monkey key", "pass\x00word", "api_\u212aey", "İ", "\u212a", "üñï",
	"say \"hi\"", "back\\slash", "tab\there", "a\u2028b", "dana@example.org", "abba", "x=1;y=2",
}

var hostileKeys = []string{
	"api_key", "API-KEY", "apiKey", "pass_word", "pass\"word", "pass\x00word", "se\ncret", "api_\u212aey", "İ", "token",
	"max_tokens", "prompt_tokens", "keyboard", "a/b", "c~d", "clientSecret", "Authorization", "", "x", "é", "secret_key",
	"sk-abcdefghijkl", "ghp_abcdefghijklmnop", "[REDACTED]", "[REDACTED] (2)", "Bearer abcdefghij", "api_key=abc123!x",
	"https://u:p\x01@host", "dana", "abba",
}

// hostileValue builds a random value from hostile keys and strings, with
// sensitive keys and credentials at every depth.
func hostileValue(r *rand.Rand, depth int) Value {
	n := r.IntN(9)
	if depth > 4 {
		n = r.IntN(5)
	}
	switch n {
	case 0:
		return NullValue
	case 1:
		return IntValue(r.Int64N(1000))
	case 2:
		return redactedValue
	case 3, 4:
		s := hostileStrings[r.IntN(len(hostileStrings))]
		if r.IntN(3) == 0 { // glued to another
			s = hostileStrings[r.IntN(len(hostileStrings))] + s
		}
		return StringValue(s)
	case 5, 6:
		var ms []Member
		seen := map[string]bool{}
		for range r.IntN(5) {
			k := hostileKeys[r.IntN(len(hostileKeys))]
			if r.IntN(4) == 0 {
				k += hostileStrings[r.IntN(len(hostileStrings))]
			}
			if !seen[k] {
				seen[k] = true
				ms = append(ms, Member{k, hostileValue(r, depth+1)})
			}
		}
		v, err := ObjectValue(ms...)
		if err != nil {
			panic(err)
		}
		return v
	default:
		elems := make([]Value, r.IntN(4))
		for i := range elems {
			elems[i] = hostileValue(r, depth+1)
		}
		v, _ := ArrayValue(elems...)
		return v
	}
}

// TestRedactValueMatchesReference compares the single descent with the
// walk it replaced on hostile values: the same output and findings with
// and without scrubbers.
func TestRedactValueMatchesReference(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		`{"u":"https://u:p\u0001@host"}`, `{"max_tokens":1,"u":"https://u:p\u0001@host"}`,
		`{"a":{"u":"https://u:p\u0001@host"},"sk-abcdefghijkl":1}`, `"https://u:p\u0001@host"`, `["user:pw\u0001@tcp(h)/db"]`,
		`{"max_tokens":512,"messages":[{"content":"You are a careful agent.\nAnswer in JSON.","role":"system"}],"temperature":0.61}`,
		`{"password":{"api_key":"x"}}`, `{"password":"[REDACTED]"}`, `{"[REDACTED]":1,"sk-abcdefghijkl":2,"ghp_abcdefghijklmnop":3}`,
		`{"a":{"b":{"c":{"d":{"se\u0000cret":"x"}}}}}`, `{"api_\u212aey":"x"}`, `{"\u0130":"sk-abcdefghijkl"}`, `1`, `null`, `""`,
		`"[REDACTED]"`, `[]`, `{}`, `[[[[["ghp_abcdefghijklmnop"]]]]]`, `{"k":"api_key=\"abc123\""}`,
	} {
		checkSameRedaction(t, MustParse(text))
	}
	for _, s := range hostileStrings {
		for _, k := range hostileKeys {
			checkSameRedaction(t, StringValue(s))
			checkSameRedaction(t, MustValueOf(map[string]any{k: s, "n": []any{s, map[string]any{k: s}}}))
			checkSameRedaction(t, MustValueOf(map[string]any{"max_tokens": 1, "x": []any{map[string]any{k: s}}}))
		}
	}
	r := rand.New(rand.NewPCG(24, 3))
	for range 10000 {
		checkSameRedaction(t, hostileValue(r, 0))
	}
}

func FuzzRedactValueMatchesReference(f *testing.F) {
	for _, s := range []string{
		`{"api_key":"x","a/b":{"c~d":["sk-abcdefghijkl",1,{"token":"t","password":"p"}]},"z":"Bearer abcdefghij"}`,
		`{"max_tokens":1,"u":"https://u:p\u0001@host","v":{"w":"user:pw\u0001@tcp(h)/db"}}`,
		`{"a":{"u":"https://u:p\u0001@host"},"sk-abcdefghijkl":1}`, `{"[REDACTED]":1,"sk-abcdefghijkl":2}`,
		`{"messages":[{"content":"use sk-live-1234567890 now\n","role":"user"}],"usage":{"total_tokens":3}}`,
		`["Basic\tYWxpY2U6czNjcjN0",{"k":"api_key=\"abc123\"","pass\"word":"dana"}]`, `"https://u:p\f@host"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v, err := ParseValue([]byte(text))
		if err != nil {
			return
		}
		checkSameRedaction(t, v)
		ev := Event{ID: "evt_1", RunID: "run_1", Type: ToolCall, Name: "search", Input: v, Output: v}
		for i, scrub := range testScrubbers {
			got, gotE, gotErr := RedactEvent(ev, scrub...)
			want, wantE, wantErr := redactEventRef(ev, scrub...)
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotE, wantE) || gotErr != wantErr {
				t.Fatalf("scrubbers %d: RedactEvent with payloads %s = %+v %v, reference %+v %v", i, text, got, gotE, want, wantE)
			}
		}
	})
}

// TestIsSensitiveKeyFast compares the descent's key test with
// IsSensitiveKey and its map, on keys of every shape, and on every rune
// that lowercases to an ASCII letter or digit.
func TestIsSensitiveKeyFast(t *testing.T) {
	t.Parallel()
	for k := range sensitiveKeys {
		if !isSensitiveKey(k) || !isSensitiveKey(strings.ToUpper(k)) {
			t.Errorf("isSensitiveKey(%q) = false", k)
		}
	}
	keys := append([]string{"max_tokens", "api" + strings.Repeat("_", 40) + "key", "apikeyapikeyapikey", "authorization1",
		"a.p.i.k.e.y", "pässword", "api_\u212aey", "\u0130", "x\xffpassword"}, hostileKeys...)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if l := unicode.ToLower(r); r >= 0x80 && (l >= 'a' && l <= 'z' || l >= '0' && l <= '9') {
			keys = append(keys, "api_"+string(r)+"ey", "pa"+string(r)+"sword", string(r))
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{"api", "key", "_", "-", "K", "E", "Y", "pass", "word", "secret", "client", "\u212a", "é", "\x00", "token", "auth"}
	for range 20000 {
		var b strings.Builder
		for n := rng.IntN(6); n >= 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		keys = append(keys, b.String())
	}
	for _, k := range keys {
		if got, want := isSensitiveKey(k), IsSensitiveKey(k); got != want {
			t.Errorf("isSensitiveKey(%q) = %v, IsSensitiveKey %v", k, got, want)
		}
	}
}

// TestAppendUnescaped checks the descent's decoding of a string literal
// against Str on every escape canonical text writes.
func TestAppendUnescaped(t *testing.T) {
	t.Parallel()
	var all []byte
	for c := range 0x80 {
		all = append(all, byte(c))
	}
	for _, s := range append([]string{string(all), "\\\"", "a\\u0041\\", "ü\x01ü", "\x7f"}, hostileStrings...) {
		lit := StringValue(s).raw
		got, ok := appendUnescaped(nil, lit)
		want, _ := Value{lit}.Str()
		if !ok || string(got) != want {
			t.Errorf("appendUnescaped(%s) = %q, %v; want %q", lit, got, ok, want)
		}
	}
	for _, lit := range []string{`"\u00e9"`, `"\ud83d\ude00"`, `"\u20ac"`} {
		if _, ok := appendUnescaped(nil, lit); ok {
			t.Errorf("appendUnescaped(%s) decoded an escape canonical text does not write", lit)
		}
	}
	if got, ok := appendUnescaped(nil, `"a\/b\u001F"`); !ok || string(got) != "a/b\x1f" {
		t.Errorf("appendUnescaped = %q, %v", got, ok)
	}
}

// redactEventRef is RedactEvent as it was before the single descent: the
// filter over every payload's text, then a copy of the event redacted
// field by field.
func redactEventRef(ev Event, scrub ...Scrubber) (Event, []RedactionEntry, error) {
	for _, s := range [...]string{ev.ID, ev.RunID, ev.ParentID, string(ev.Type), string(ev.Status),
		string(ev.ReplayPolicy), ev.InputHash, ev.OutputHash, string(ev.RunStatus)} {
		if _, hit := RedactString(s, scrub...); hit {
			return ev, nil, ErrProtectedField
		}
	}
	for _, s := range ev.Redactions {
		if _, hit := RedactString(s, scrub...); hit {
			return ev, nil, ErrProtectedField
		}
	}
	if len(scrub) == 0 && !mayHoldCredential(ev.ErrorType) && !mayHoldCredential(ev.Key) && !mayHoldCredential(ev.Message) &&
		!mayHoldCredential(ev.Model) && !mayHoldCredential(ev.Name) && !mayHoldCredential(ev.Provider) &&
		!mayNeedRedaction(ev.After.raw) && !mayNeedRedaction(ev.Before.raw) && !mayNeedRedaction(ev.Details.raw) &&
		!mayNeedRedaction(ev.Input.raw) && !mayNeedRedaction(ev.Output.raw) {
		return ev, nil, nil // nothing to redact: ev itself, sharing its slices
	}
	out := ev.Clone()
	var entries []RedactionEntry
	add := func(path, reason string) {
		entries = append(entries, RedactionEntry{EventID: ev.ID, Path: path, Reason: reason, Replacement: Redacted})
	}
	// The redactable fields in sorted order; each is a string or a payload.
	for _, f := range []struct {
		name string
		s    *string
		v    *Value
	}{{"after", nil, &out.After}, {"before", nil, &out.Before}, {"details", nil, &out.Details},
		{"error_type", &out.ErrorType, nil}, {"input", nil, &out.Input}, {"key", &out.Key, nil},
		{"message", &out.Message, nil}, {"model", &out.Model, nil}, {"name", &out.Name, nil},
		{"output", nil, &out.Output}, {"provider", &out.Provider, nil}} {
		if f.s != nil {
			if r, reason := scrubString(*f.s, scrub); reason != "" {
				*f.s = r
				add("/"+f.name, reason)
			}
			continue
		}
		r, fs := redactValueRef(*f.v, scrub...)
		*f.v = r
		for _, x := range fs {
			add("/"+f.name+x.Path, x.Reason)
		}
	}
	if len(entries) > 0 {
		have := make(map[string]bool, len(out.Redactions))
		for _, p := range out.Redactions {
			have[p] = true
		}
		for _, e := range entries {
			if !have[e.Path] {
				out.Redactions = append(out.Redactions, e.Path)
				have[e.Path] = true
			}
		}
	}
	return out, entries, nil
}

// TestRedactEventMatchesReference compares RedactEvent with the reference
// on hostile events: credentials and sensitive keys in payloads at every
// depth, credentials in names, keys, messages and protected fields, with
// and without scrubbers. The event may be ev itself where the reference
// gave a copy (nothing redacted), never a different one.
func TestRedactEventMatchesReference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(24, 4))
	str := func() string {
		if r.IntN(3) > 0 {
			return []string{"", "search", "gpt-4o", "refund"}[r.IntN(4)]
		}
		return hostileStrings[r.IntN(len(hostileStrings))]
	}
	payload := func() Value {
		switch r.IntN(4) {
		case 0:
			return Value{}
		case 1:
			return MustParse(`{"max_tokens":512,"messages":[{"content":"You are a careful agent.\nAnswer in JSON.","role":"system"}]}`)
		}
		return hostileValue(r, 0)
	}
	for i := range 4000 {
		ev := Event{ID: "evt_1", RunID: "run_1", Type: LLMRequest, Status: StatusOK, ReplayPolicy: PolicyFrozen,
			Name: str(), Key: str(), Message: str(), Model: str(), Provider: str(), ErrorType: str(),
			Input: payload(), Output: payload(), Before: payload(), After: payload(), Details: payload()}
		if r.IntN(10) == 0 {
			ev.ParentID = str()
		}
		if r.IntN(4) == 0 {
			ev.Redactions = []string{"/input/x"}
		}
		for j, scrub := range testScrubbers {
			got, gotE, gotErr := RedactEvent(ev, scrub...)
			want, wantE, wantErr := redactEventRef(ev, scrub...)
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotE, wantE) || gotErr != wantErr {
				t.Fatalf("case %d, scrubbers %d: RedactEvent(%+v)\n= %+v %v %v\nreference %+v %v %v", i, j, ev, got, gotE, gotErr, want, wantE, wantErr)
			}
		}
	}
}

// TestRedactValueMissesNothing checks that the filters over JSON text never
// keep a string RedactString would change: RedactValue gives what the eager
// walk (RedactString on every string and key, every sensitive key) gives,
// on credentials next to escapes, which the JSON text spells differently
// from the string ("Basic\tX", a control character in a URL's password or
// a DSN's), alone in their value and among other members.
func TestRedactValueMissesNothing(t *testing.T) {
	t.Parallel()
	check := func(v Value) {
		t.Helper()
		got, gotF := RedactValue(v)
		var wantF []Finding
		want := redactWalkEager(v, "", &wantF)
		if got.raw != want.raw || len(gotF) != len(wantF) {
			t.Fatalf("RedactValue(%s) = %s %v, eager walk %s %v", v.raw, got.raw, gotF, want.raw, wantF)
		}
	}
	for _, s := range []string{"Basic\tYWxpY2U6czNjcjN0", "https://u:p\x01@host", "https://u:p\f@host", "user:pw\x01@tcp(h)/db"} {
		v := MustValueOf(map[string]any{"u": s})
		if got, _ := RedactValue(v); strings.Contains(got.raw, "@host") && strings.Contains(got.raw, "u:p") ||
			strings.Contains(got.raw, "YWxpY2U6czNjcjN0") || strings.Contains(got.raw, "pw") {
			t.Errorf("RedactValue(%s) = %s: the credential is kept", v.raw, got.raw)
		}
	}
	for _, s := range hostileStrings {
		check(StringValue(s))
		for _, k := range hostileKeys {
			check(MustValueOf(map[string]any{k: s}))
			check(MustValueOf(map[string]any{"x": []any{s, map[string]any{k: s}}, "max_tokens": 1}))
		}
	}
	r := rand.New(rand.NewPCG(24, 4))
	for range 10000 {
		check(hostileValue(r, 0))
	}
}
