package trace

import (
	"errors"
	"strconv"
	"strings"
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

// mayNeedRedaction is a cheap filter over canonical text: a value that passes
// neither mayHoldCredential nor hasSensitiveAnchor has neither a sensitive key
// nor a credential.
func mayNeedRedaction(s string) bool {
	return anchorMask(s) != 0 || hasSensitiveAnchor(s) // a key=value secret holds a sensitive anchor
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
	if v.IsAbsent() || len(scrub) == 0 && !mayNeedRedaction(v.raw) {
		return v, nil
	}
	var fs []Finding
	var path pointerPath
	out := redactWalk(v, &path, &fs, scrub)
	return out, fs
}

// redactedValue is StringValue(Redacted), written out so that no program
// quotes it when it starts.
var redactedValue = Value{`"` + Redacted + `"`}

// pointerPath is the JSON Pointer of the value redactWalk is at, kept as
// a stack of segments and spelled out (pointer) only for a finding: a walk
// through a large value that finds nothing builds no path.
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

func redactWalk(v Value, path *pointerPath, fs *[]Finding, scrub []Scrubber) Value {
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
			r := redactWalk(e, path, fs, scrub)
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
				r = redactWalk(x, path, fs, scrub)
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
// ev itself, sharing its Redactions and pointers. Scrubbers, when given,
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
		r, fs := RedactValue(*f.v, scrub...)
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
