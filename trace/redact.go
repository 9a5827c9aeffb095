package trace

import (
	"errors"
	"strconv"
	"strings"
	"unsafe"
)

// Redacted is what a redacted value is replaced with.
const Redacted = "[REDACTED]"

// ManifestEventID is the event_id of redaction entries that concern
// manifest.json rather than an event.
const ManifestEventID = "__manifest__"

// Redaction reasons.
const (
	ReasonSensitiveKey      = "sensitive_key"
	ReasonCredentialPattern = "credential_pattern"
	ReasonScrubber          = "scrubber" // a [Scrubber] the user installed
)

// ErrProtectedField is returned when a credential pattern appears in a field
// that redaction must not change (an id, a status, a hash…): the trace cannot
// be written without either leaking the secret or corrupting its structure.
var ErrProtectedField = errors.New("credential pattern found in protected structural field")

// RedactionEntry is one entry of redactions.json: where a value was redacted
// and why. It never holds the secret, a hash of it or any other encoding.
type RedactionEntry struct {
	EventID     string // the event id, or ManifestEventID
	Path        string // JSON Pointer from the event (or manifest) root
	Reason      string // ReasonSensitiveKey or ReasonCredentialPattern
	Replacement string // always Redacted
}

// Finding is one redaction made by RedactValue: a JSON Pointer relative to the
// value's root and the reason.
type Finding struct {
	Path   string
	Reason string
}

// sensitiveKeys are the normalized keys whose values are always redacted.
var sensitiveKeys = map[string]bool{
	"apikey": true, "accesstoken": true, "refreshtoken": true, "authtoken": true,
	"authorization": true, "password": true, "passwd": true, "secret": true,
	"clientsecret": true, "privatekey": true, "sessiontoken": true, "bearertoken": true,
}

// IsSensitiveKey reports whether values under key are redacted: the key,
// lowercased with everything but [a-z0-9] removed, is one of apikey,
// accesstoken, refreshtoken, authtoken, authorization, password, passwd,
// secret, clientsecret, privatekey, sessiontoken or bearertoken. So api_key,
// API-KEY, accessToken and clientSecret are sensitive; token, secret_key and
// x-api-key are not.
func IsSensitiveKey(key string) bool {
	// The longest sensitive key, authorization, has 13 letters; separators
	// do not count, so a long key (api_____key) may still be sensitive.
	var buf [14]byte
	n := 0
	for _, r := range strings.ToLower(key) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if n == len(buf) {
				return false
			}
			buf[n] = byte(r)
			n++
		}
	}
	return sensitiveKeys[string(buf[:n])]
}

// mayHoldCredentialJSON is mayHoldCredential over JSON text (canonical or
// file form): the text as it is, and each string literal in it that holds
// an escape, read unescaped. An escape stands for a character the patterns
// read as itself: "Basic\tX", "https://u:p\u0001@h" or "u:pw\f@tcp(h)/"
// hold a credential once unescaped, which the text alone does not show (a
// backslash ends a URL's password, and "\t" is not white space).
//
// Only an anchor that needs a look around it can be hidden so (the anchors
// hold no character that is escaped), and only when the text holds one
// without what it needs (gMissed) are the strings with an escape read.
func mayHoldCredentialJSON(s string) bool {
	switch bits := anchorBits(s); {
	case bits&^gMissed != 0:
		return true
	case bits&gMissed == 0 || strings.IndexByte(s, '\\') < 0:
		return false
	}
	for i := 0; i < len(s); {
		q := strings.IndexByte(s[i:], '"')
		if q < 0 {
			return false
		}
		start := i + q
		end, escaped, ok := literalEnd(s, start)
		if !ok {
			return true // not JSON text: the exact pass decides
		}
		if escaped && mayChange(s[start:end], true) {
			return true
		}
		i = end
	}
	return false
}

// literalEnd returns the offset just past the string literal that starts
// at s[start] (a '"'), whether it holds an escape, and false when it does
// not end.
func literalEnd(s string, start int) (end int, escaped, ok bool) {
	for j := start + 1; ; {
		q := strings.IndexByte(s[j:], '"')
		if q < 0 {
			return len(s), escaped, false
		}
		k := j + q
		n := 0 // the backslashes just before the quote: an odd run escapes it
		for n < k-j && s[k-1-n] == '\\' {
			n++
		}
		if n > 0 || strings.IndexByte(s[j:k], '\\') >= 0 {
			escaped = true
		}
		if n%2 == 0 {
			return k + 1, escaped, true
		}
		j = k + 1
	}
}

// RedactValue returns v with every value under a sensitive key replaced by
// "[REDACTED]" and credential patterns replaced inside every other string, and
// the findings with JSON Pointer paths (RFC 6901) relative to v. v itself is
// not changed (Values are immutable). Redacting a redacted value finds
// nothing.
//
// Scrubbers, when given, are applied to every string and key after the
// credential patterns (see [Scrubber]); what they change is found with
// [ReasonScrubber].
func RedactValue(v Value, scrub ...Scrubber) (Value, []Finding) {
	if v.IsAbsent() {
		return v, nil
	}
	var w redactor
	w.scrub = scrub
	switch v.raw[0] {
	case '"':
		out, _ := w.walkString(v.raw, strings.IndexByte(v.raw, '\\') >= 0, nil)
		return out, w.fs
	case '[', '{':
		out, _, _ := w.walk(v.raw, 0, nil)
		return out, w.fs
	}
	return v, nil // a number, a boolean or null: nothing to redact
}

// redactedValue is StringValue(Redacted), written out so that no program
// quotes it when it starts.
var redactedValue = Value{`"` + Redacted + `"`}

// A redactor is one descent of RedactValue through the canonical text of
// a value: it reads every string and key once, decides there whether it
// may change (its credential anchors, the key's sensitivity), and rebuilds
// only the containers on the way to a change. A clean value costs one read
// and no allocation.
type redactor struct {
	scrub []Scrubber
	fs    []Finding
}

// A frame is a container the descent is in, on the stack of the walk that
// reads it, with the member or element being walked: a segment of the
// JSON Pointer of what is found there.
type frame struct {
	up  *frame
	seg bool // key or idx is the segment of the value walked
	arr bool
	idx int
	key string
}

// finding records a finding at the value walked in the innermost frame f,
// with its JSON Pointer written from its last segment back (a loop that
// only reads the frames, so that they stay on the walk's stack).
func (w *redactor) finding(f *frame, reason string) {
	n := 0
	var digits [20]byte
	for g := f; g != nil; g = g.up {
		switch {
		case !g.seg:
		case g.arr:
			n += 1 + len(strconv.AppendInt(digits[:0], int64(g.idx), 10))
		default:
			n += 1 + len(g.key) + strings.Count(g.key, "~") + strings.Count(g.key, "/")
		}
	}
	b := make([]byte, n)
	for g := f; g != nil; g = g.up {
		switch {
		case !g.seg:
			continue
		case g.arr:
			d := strconv.AppendInt(digits[:0], int64(g.idx), 10)
			n -= copy(b[n-len(d):], d)
		default:
			for i := len(g.key) - 1; i >= 0; i-- { // RFC 6901: ~ is ~0, / is ~1
				switch c := g.key[i]; c {
				case '~':
					b[n-2], b[n-1] = '~', '0'
					n -= 2
				case '/':
					b[n-2], b[n-1] = '~', '1'
					n -= 2
				default:
					n--
					b[n] = c
				}
			}
		}
		n--
		b[n] = '/'
	}
	w.fs = append(w.fs, Finding{string(b), reason})
}

// stringEnd returns the offset just past the string literal that starts at
// s[i] (a '"'), and whether it holds an escape.
func stringEnd(s string, i int) (end int, escaped bool) {
	rest := s[i+1:]
	q := strings.IndexByte(rest, '"')
	if b := strings.IndexByte(rest[:q], '\\'); b < 0 {
		return i + 1 + q + 1, false
	}
	return skipValue(s, i), true
}

// mayChange reports whether the string literal lit (quotes included, in
// canonical form) may be changed by scrubString without scrubbers: a
// string in which anchorMask finds nothing is kept as it is.
func mayChange(lit string, escaped bool) bool {
	if !escaped {
		return anchorMask(lit[1:len(lit)-1]) != 0
	}
	var buf [512]byte // on the stack: a longer string is unescaped on the heap
	b, ok := appendUnescaped(buf[:0], lit)
	if !ok {
		return anchorMask(unquote(lit)) != 0
	}
	return anchorMask(unsafe.String(unsafe.SliceData(b), len(b))) != 0
}

// appendUnescaped appends the string held by the canonical string literal
// lit, and reports false (for unquote to decode it) when it holds a \u
// escape of a character above U+007F, which canonical text never writes.
func appendUnescaped(dst []byte, lit string) ([]byte, bool) {
	s := lit[1 : len(lit)-1]
	for {
		i := strings.IndexByte(s, '\\')
		if i < 0 {
			return append(dst, s...), true
		}
		dst = append(dst, s[:i]...)
		if i+1 >= len(s) {
			return dst, false
		}
		switch c := s[i+1]; c {
		case '"', '\\', '/':
			dst = append(dst, c)
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'u':
			if i+6 > len(s) || s[i+2] != '0' || s[i+3] != '0' {
				return dst, false
			}
			h, l := unhex(s[i+4]), unhex(s[i+5])
			if h < 0 || l < 0 || h > 7 {
				return dst, false
			}
			dst = append(dst, byte(h<<4|l))
			s = s[i+6:]
			continue
		default:
			return dst, false
		}
		s = s[i+2:]
	}
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// walk redacts the value that starts at s[i], in the container up, and
// returns it, whether it changed, and the offset of its end in s.
func (w *redactor) walk(s string, i int, up *frame) (Value, bool, int) {
	switch s[i] {
	case '"':
		end, escaped := stringEnd(s, i)
		out, changed := w.walkString(s[i:end], escaped, up)
		return out, changed, end
	case '[':
		return w.walkArray(s, i, up)
	case '{':
		return w.walkObject(s, i, up)
	}
	end := i + 1
	for end < len(s) && s[end] != ',' && s[end] != '}' && s[end] != ']' {
		end++
	}
	return Value{s[i:end]}, false, end
}

func (w *redactor) walkString(lit string, escaped bool, up *frame) (Value, bool) {
	if len(w.scrub) == 0 && !mayChange(lit, escaped) {
		return Value{lit}, false
	}
	s, _ := Value{lit}.Str()
	if r, reason := scrubString(s, w.scrub); reason != "" {
		w.finding(up, reason)
		out := StringValue(r)
		return out, out.raw != lit // scrubbers may have undone each other
	}
	return Value{lit}, false
}

func (w *redactor) walkArray(s string, i int, up *frame) (Value, bool, int) {
	f := frame{up: up, seg: true, arr: true}
	var elems []Value
	changed := false
	j := i + 1
	for s[j] != ']' {
		r, ch, end := w.walk(s, j, &f)
		if ch && !changed {
			changed = true
			elems = make([]Value, 0, f.idx+1)
			for k, x := range (Value{s[i:skipValue(s, i)]}).Elems() { // the elements before this one, unchanged
				if k == f.idx {
					break
				}
				elems = append(elems, x)
			}
		}
		if changed {
			elems = append(elems, r)
		}
		if j = end; s[j] == ',' {
			j++
		}
		f.idx++
	}
	if !changed {
		return Value{s[i : j+1]}, false, j + 1
	}
	out, _ := ArrayValue(elems...)
	return out, true, j + 1
}

func (w *redactor) walkObject(s string, i int, up *frame) (Value, bool, int) {
	f := frame{up: up}
	var ms []Member
	changed := false
	n := 0
	j := i + 1
	for ; s[j] != '}'; n++ {
		kEnd, escaped := stringEnd(s, j)
		lit := s[j:kEnd]
		k := lit[1 : len(lit)-1]
		if escaped {
			k = unquote(lit)
		}
		j = kEnd + 1 // the value, after the ':'

		key := k
		if len(w.scrub) > 0 || mayChange(lit, escaped) { // a key may hold a credential too
			if rk, reason := scrubString(k, w.scrub); reason != "" {
				// The member keeps its place under a redacted key,
				// made unique among the object's keys.
				key = uniqueKey(Value{s[i:skipValue(s, i)]}, ms, rk)
				f.seg, f.key = true, key
				w.finding(&f, reason)
			}
		}
		f.seg, f.key = true, key
		var x, r Value
		var ch bool
		if isSensitiveKey(k) {
			end := skipValue(s, j)
			x, r, j = Value{s[j:end]}, Value{s[j:end]}, end
			if x != redactedValue {
				r, ch = redactedValue, true
				w.finding(&f, ReasonSensitiveKey)
			}
		} else {
			r, ch, j = w.walk(s, j, &f)
		}
		if (ch || key != k) && !changed {
			changed = true
			ms = make([]Member, 0, n+1)
			for k2, x2 := range (Value{s[i:skipValue(s, i)]}).Members() { // the members before this one, unchanged
				if len(ms) == n {
					break
				}
				ms = append(ms, Member{k2, x2})
			}
		}
		if changed {
			ms = append(ms, Member{key, r})
		}
		if s[j] == ',' {
			j++
		}
	}
	if !changed {
		return Value{s[i : j+1]}, false, j + 1
	}
	out, _ := ObjectValue(ms...)
	return out, true, j + 1
}

// isSensitiveKey is IsSensitiveKey without allocating for ASCII keys and
// without a map: normalizing never lengthens a key, so a key shorter than
// the shortest sensitive key (6 letters) is not one, and the normalized
// key is compared by a switch.
func isSensitiveKey(key string) bool {
	if len(key) < 6 {
		return false
	}
	var buf [14]byte
	n := 0
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 0x80:
			return IsSensitiveKey(key) // Unicode lowercasing
		default:
			continue
		}
		if n == len(buf) {
			return false
		}
		buf[n] = c
		n++
	}
	switch string(buf[:n]) {
	case "apikey", "accesstoken", "refreshtoken", "authtoken", "authorization", "password", "passwd",
		"secret", "clientsecret", "privatekey", "sessiontoken", "bearertoken":
		return true
	}
	return false
}

// uniqueKey returns key, or key with " (2)", " (3)"… after it, so that it
// is neither a key of obj nor of the members kept so far.
func uniqueKey(obj Value, kept []Member, key string) string {
	taken := func(k string) bool {
		if !obj.Get(k).IsAbsent() {
			return true
		}
		for _, m := range kept {
			if m.Key == k {
				return true
			}
		}
		return false
	}
	if !taken(key) {
		return key
	}
	for n := 2; ; n++ {
		if k := key + " (" + strconv.Itoa(n) + ")"; !taken(k) {
			return k
		}
	}
}

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// RedactEvent returns a redacted copy of ev and the redactions.json entries
// for it, in the order Python finds them (fields by name, then depth first by
// key). The paths are also appended to the copy's Redactions list (existing
// entries first, no duplicates). A credential in a protected field (id,
// run_id, parent_id, type, status, replay_policy, hashes, redactions,
// run_status) is ErrProtectedField. When nothing is redacted the result is
// ev itself, sharing its Redactions and pointers (without scrubbers, and
// unless a name, key, message, error type, model or provider holds an
// anchor of a credential pattern: then it is a copy). Scrubbers, when given,
// apply to every redactable field after the credential patterns (see
// [Scrubber]), and to the protected ones as the patterns do.
func RedactEvent(ev Event, scrub ...Scrubber) (Event, []RedactionEntry, error) {
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
	// The payloads, each read once by RedactValue's descent (a filter over
	// their text would read a model request's twice: its max_tokens key
	// holds an anchor of the sensitive keys).
	var payloads [5]struct {
		v  Value
		fs []Finding
	}
	found := false
	for i, v := range [...]Value{ev.After, ev.Before, ev.Details, ev.Input, ev.Output} {
		payloads[i].v, payloads[i].fs = RedactValue(v, scrub...)
		found = found || len(payloads[i].fs) > 0
	}
	if len(scrub) == 0 && !found && !mayHoldCredential(ev.ErrorType) && !mayHoldCredential(ev.Key) &&
		!mayHoldCredential(ev.Message) && !mayHoldCredential(ev.Model) && !mayHoldCredential(ev.Name) &&
		!mayHoldCredential(ev.Provider) {
		return ev, nil, nil // nothing to redact: ev itself, sharing its slices
	}
	out := ev.Clone()
	var entries []RedactionEntry
	add := func(path, reason string) {
		entries = append(entries, RedactionEntry{EventID: ev.ID, Path: path, Reason: reason, Replacement: Redacted})
	}
	// The redactable fields in sorted order; each is a string or a payload
	// (its index in payloads).
	for _, f := range []struct {
		name string
		s    *string
		v    *Value
		p    int
	}{{"after", nil, &out.After, 0}, {"before", nil, &out.Before, 1}, {"details", nil, &out.Details, 2},
		{"error_type", &out.ErrorType, nil, 0}, {"input", nil, &out.Input, 3}, {"key", &out.Key, nil, 0},
		{"message", &out.Message, nil, 0}, {"model", &out.Model, nil, 0}, {"name", &out.Name, nil, 0},
		{"output", nil, &out.Output, 4}, {"provider", &out.Provider, nil, 0}} {
		if f.s != nil {
			if r, reason := scrubString(*f.s, scrub); reason != "" {
				*f.s = r
				add("/"+f.name, reason)
			}
			continue
		}
		*f.v = payloads[f.p].v
		for _, x := range payloads[f.p].fs {
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

// RedactManifest returns a redacted copy of m and its entries (event id
// ManifestEventID). agent_name, failure.type, failure.message and the
// environment strings are redactable; run_id is protected. Scrubbers,
// when given, apply as in [RedactEvent].
func RedactManifest(m Manifest, scrub ...Scrubber) (Manifest, []RedactionEntry, error) {
	if _, hit := RedactString(m.RunID, scrub...); hit {
		return m, nil, ErrProtectedField
	}
	out := m
	var entries []RedactionEntry
	add := func(path string, p *string) {
		if r, reason := scrubString(*p, scrub); reason != "" {
			*p = r
			entries = append(entries, RedactionEntry{ManifestEventID, path, reason, Redacted})
		}
	}
	add("/agent_name", &out.AgentName)
	env := out.Environment
	for _, f := range []struct {
		name string
		p    **string
	}{{"os", &env.OS}, {"python", &env.Python}, {"stepfork_version", &env.StepforkVersion}} {
		if *f.p != nil {
			s := **f.p
			add("/environment/"+f.name, &s)
			*f.p = &s
		}
	}
	out.Environment = env
	if m.Failure != nil {
		f := *m.Failure
		add("/failure/message", &f.Message)
		add("/failure/type", &f.Type)
		out.Failure = &f
	}
	return out, entries, nil
}
