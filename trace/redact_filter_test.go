package trace

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// plainAnchors are the anchors that need nothing after them.
func plainAnchors() []string {
	var out []string
	for _, a := range credentialAnchors {
		if a.group != gURL && a.group != gDSN {
			out = append(out, a.s)
		}
	}
	return out
}

// naiveMayHoldCredential is the filter's definition: some plain anchor, or
// "bearer" in any case, is a substring; or one of the anchors that need a
// look after them is followed by what they need; or a key=value secret is
// there.
func naiveMayHoldCredential(s string) bool {
	for _, a := range plainAnchors() {
		if strings.Contains(s, a) {
			return true
		}
	}
	low := []byte(s) // lower case, ASCII only, so that offsets stay
	for i, c := range low {
		if c >= 'A' && c <= 'Z' {
			low[i] = c + 'a' - 'A'
		}
	}
	if strings.Contains(string(low), "bearer") {
		return true
	}
	for i := range len(s) {
		if strings.HasPrefix(string(low[i:]), "basic") && basicAt(s, i+5) > 0 ||
			strings.HasPrefix(s[i:], "://") && userinfoPassword(s, i+3) >= 0 ||
			(strings.HasPrefix(s[i:], "@tcp(") || strings.HasPrefix(s[i:], "@unix(")) && dsnPassword(s, i) >= 0 {
			return true
		}
	}
	start, _, _ := nextKeyValue(s, 0)
	return start >= 0
}

// TestMayHoldCredentialIsItsDefinition compares the pair filter with the
// definition on strings built from anchors, their prefixes and noise, at
// every position, including the very end; and checks that a string the
// filter passes over is one RedactString keeps.
func TestMayHoldCredentialIsItsDefinition(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	pieces := append([]string{"", "a", "s", "k", "-", "_", "b", "B", "e", "r", "A", "I", "z", "x", "o", "y", "J", "P",
		"bEaReR", "Bearer ", "bea", "RIVATE", "PRIVATE KE", "ghp", "AKI", "ey", "sk", "ü", "\u212a", `"`, "\\",
		"Basic ", "dXNlcjpwYXNz", "https://", "u:p@", "user:", "@tcp(", "h)/db", "api_key", "=", ":", " ", "password",
		"hunter22", "'", "secret", "\\\"", "[REDACTED]", "@", "/", "\t", "\x01", "\f", "\n", "\\", "\""}, plainAnchors()...)
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := r.IntN(6); n >= 0; n-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		if got, want := mayHoldCredential(s), naiveMayHoldCredential(s); got != want {
			t.Fatalf("mayHoldCredential(%q) = %v, want %v", s, got, want)
		}
		red, hit := RedactString(s)
		if !mayHoldCredential(s) && (hit || red != s) {
			t.Fatalf("RedactString(%q) = %q, but the filter passes over it", s, red)
		}
		if js := StringValue(s).Canonical(); !mayHoldCredentialJSON(js) {
			str, _ := StringValue(s).Str() // invalid UTF-8 is replaced
			if r, hit := RedactString(str); hit {
				t.Fatalf("RedactString(%q) = %q, but the filter over its JSON text %s passes over it", str, r, js)
			}
		}
	}
	for _, a := range append(plainAnchors(), "bearer", "BEARER") {
		for _, s := range []string{a, "x" + a, a + "x", "xx" + a[:len(a)-1]} {
			if got, want := mayHoldCredential(s), naiveMayHoldCredential(s); got != want {
				t.Errorf("mayHoldCredential(%q) = %v, want %v", s, got, want)
			}
		}
	}
}

func BenchmarkMayHoldCredential(b *testing.B) {
	text := strings.Repeat(`{"content":"The refund of order 1234 was approved by the agent after checking the policy limits and the customer's history.","role":"assistant","usage":{"total_tokens":42}}`, 8)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if mayHoldCredential(text) {
			b.Fatal("no anchor in the text")
		}
	}
}

// redactWalkEager is redactWalk as it was before paths were built lazily:
// the reference the lazy walk must agree with.
func redactWalkEager(v Value, path string, fs *[]Finding) Value {
	switch v.Kind() {
	case String:
		s, _ := v.Str()
		if r, ok := RedactString(s); ok {
			*fs = append(*fs, Finding{path, ReasonCredentialPattern})
			return StringValue(r)
		}
		return v
	case Array:
		var elems []Value
		changed := false
		for i, e := range v.Elems() {
			r := redactWalkEager(e, path+"/"+strconv.Itoa(i), fs)
			changed = changed || r != e
			elems = append(elems, r)
		}
		if !changed {
			return v
		}
		out, _ := ArrayValue(elems...)
		return out
	case Object:
		var ms []Member
		changed := false
		for k, x := range v.Members() {
			key := k
			if rk, hit := RedactString(k); hit {
				key = uniqueKey(v, ms, rk)
				*fs = append(*fs, Finding{path + "/" + escapePointer(key), ReasonCredentialPattern})
			}
			p := path + "/" + escapePointer(key)
			r := x
			if IsSensitiveKey(k) {
				if x != redactedValue {
					r = redactedValue
					*fs = append(*fs, Finding{p, ReasonSensitiveKey})
				}
			} else {
				r = redactWalkEager(x, p, fs)
			}
			changed = changed || r != x || key != k
			ms = append(ms, Member{key, r})
		}
		if !changed {
			return v
		}
		out, _ := ObjectValue(ms...)
		return out
	}
	return v
}

func FuzzRedactValueMatchesEagerWalk(f *testing.F) {
	for _, s := range []string{
		`{"api_key":"x","a/b":{"c~d":["sk-abcdefghijkl",1,{"token":"t","password":"p"}]},"z":"Bearer abcdefghij"}`,
		`[["ghp_abcdefghijklmnop"],{"x":[{"y":"AKIAABCDEFGHIJKLMNOP"}]},"plain"]`,
		`{"messages":[{"content":"use sk-live-1234567890 now","role":"user"}],"usage":{"total_tokens":3}}`,
		`"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig"`, `{"secret":"[REDACTED]"}`, `1`, `null`,
		`{"u":"https://u:p\u0001@host"}`, `["Basic\tYWxpY2U6czNjcjN0"]`, `{"d":"user:pw\u0001@tcp(h)/db"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v, err := ParseValue([]byte(text))
		if err != nil {
			return
		}
		got, gotF := RedactValue(v)
		var wantF []Finding
		want := redactWalkEager(v, "", &wantF)
		if got != want {
			t.Fatalf("RedactValue(%s) = %s, eager walk %s", text, got.raw, want.raw)
		}
		if len(gotF) != len(wantF) {
			t.Fatalf("RedactValue(%s) findings %v, eager walk %v", text, gotF, wantF)
		}
		for i := range gotF {
			if gotF[i] != wantF[i] {
				t.Fatalf("RedactValue(%s) findings %v, eager walk %v", text, gotF, wantF)
			}
		}
	})
}

// hasSensitiveAnchorWindow is hasSensitiveAnchor as it was, with a window
// of six bytes shifted by copy: the reference for the rolling word.
func hasSensitiveAnchorWindow(s string) bool {
	var w [6]byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c == '\\':
			if i+1 < len(s) && s[i+1] == 'u' {
				i += 5
			} else {
				i++
			}
			continue
		case strings.HasPrefix(s[i:], "\u212a"):
			c, i = 'k', i+2
		case strings.HasPrefix(s[i:], "\u0130"):
			c, i = 'i', i+1
		default:
			continue
		}
		copy(w[:], w[1:])
		w[5] = c
		for _, a := range []string{"key", "token", "auth", "passw", "secret"} {
			if string(w[6-len(a):]) == a {
				return true
			}
		}
	}
	return false
}

func TestHasSensitiveAnchorIsItsDefinition(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"", "k", "e", "y", "K", "E", "Y", "to", "ken", "au", "th", "pa", "ss", "w", "se", "cr", "et",
		"_", "-", " ", `"`, `\"`, `\\`, `\u0041`, `\n`, "\u212a", "ey", "\u0130", "İ", "ü", "0", "x", "SECRET", "Pass_W"}
	for i := 0; i < 50000; i++ {
		var b strings.Builder
		for n := r.IntN(8); n >= 0; n-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		if got, want := hasSensitiveAnchor(s), hasSensitiveAnchorWindow(s); got != want {
			t.Fatalf("hasSensitiveAnchor(%q) = %v, want %v", s, got, want)
		}
	}
}

func BenchmarkHasSensitiveAnchor(b *testing.B) {
	text := strings.Repeat(`{"content":"The refund of order 1234 was approved by the agent after checking the policy limits and the customer's history.","role":"assistant","usage":{"total_cost":42}}`, 8)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if hasSensitiveAnchor(text) {
			b.Fatal("no anchor in the text")
		}
	}
}
