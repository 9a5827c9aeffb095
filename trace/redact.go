package trace

import (
	"errors"
	"regexp"
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

// Python's \s and \b are Unicode-aware; RE2's are ASCII. The space class below
// covers every character Python's \s matches, so Go redacts at least what
// Python does. \b stays ASCII: Go may redact a token Python would keep (after
// a non-ASCII letter), never the reverse.
const pySpace = `[\s\x{1c}-\x{1f}\x{85}\p{Z}]`

// pemBody is what may stand between the lines of a PEM block: base64, the
// headers of an encrypted key, line breaks, and the escapes \n, \r, \t that
// stand for line breaks in JSON or escaped output (never \" or \\, so a
// redacted block inside a JSON string leaves the string well formed).
const pemBody = `(?:[A-Za-z0-9+/=\s:,.-]|\\[nrt])`

// pemCut is what the rest of a PEM block cut short may hold: base64 and
// line breaks, so that the text after it is kept.
const pemCut = `(?:[A-Za-z0-9+/=\r\n]|\\[nrt])`

// credentialPatterns are the credential patterns, in the order they are
// applied: stepfork's six (Bearer tokens after an Authorization header and
// alone, sk-, ghp_, gho_, github_pat_) and the common ones of secret
// scanners' default rules (gitleaks, GitHub secret scanning).
//
// stepfork's first two patterns, (?i)(Authorization:\s*Bearer\s+)(TOKEN) and
// (?i)(Bearer\s+)(TOKEN) with TOKEN [A-Za-z0-9._~+/=-]{8,}, keep their
// first group and replace the token; redactBearer applies both at once.
var credentialPatterns = []*regexp.Regexp{
	regexp.MustCompile(`\b(sk-[A-Za-z0-9_-]{8,})\b`),
	regexp.MustCompile(`\b(ghp_[A-Za-z0-9_]{8,})\b`),
	regexp.MustCompile(`\b(gho_[A-Za-z0-9_]{8,})\b`),
	regexp.MustCompile(`\b(github_pat_[A-Za-z0-9_]{8,})\b`),
	// GitHub user-to-server, server-to-server and refresh tokens.
	regexp.MustCompile(`\b((?:ghu|ghs|ghr)_[A-Za-z0-9_]{8,})\b`),
	// GitLab personal access tokens.
	regexp.MustCompile(`\b(glpat-[A-Za-z0-9_-]{20,})`),
	// npm access tokens.
	regexp.MustCompile(`\b(npm_[A-Za-z0-9]{36})\b`),
	// AWS access key ids: long-term (AKIA), temporary (ASIA), and the
	// other kinds' prefixes.
	regexp.MustCompile(`\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16})\b`),
	// Google API keys.
	regexp.MustCompile(`\b(AIza[A-Za-z0-9_-]{35})`),
	// Slack tokens (bot, user, app-level, refresh, configuration) and
	// incoming webhooks.
	regexp.MustCompile(`\b(xox[abeoprs]-[A-Za-z0-9-]{10,})`),
	regexp.MustCompile(`\b(xapp-[A-Za-z0-9-]{10,})`),
	regexp.MustCompile(`(hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{16,})`),
	// Stripe secret and restricted keys.
	regexp.MustCompile(`\b((?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,})`),
	// JSON Web Tokens: a header and a payload that are base64url JSON
	// objects, and a signature (empty for an unsigned token).
	regexp.MustCompile(`\b(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)`),
	// PEM private keys, from the BEGIN line to the END line, or to the end
	// of what looks like the key when the block is cut short.
	regexp.MustCompile(`-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:` + pemBody + `*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|` + pemCut + `*)`),
}

// credentialAnchors are substrings of which every match of a credential
// pattern holds one ("bearer" in any case aside): a string without them
// cannot match.
var credentialAnchors = []string{
	"sk-", "ghp_", "gho_", "github_pat_", "ghu_", "ghs_", "ghr_", "glpat-", "npm_",
	"A3T", "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "APKA",
	"AIza", "xox", "xapp-", "hooks.slack.com", "sk_", "rk_", "eyJ", "PRIVATE KEY",
}

// anchorPairs is a filter of the first two bytes of the anchors ("bearer"
// in any case included): bit c2 of anchorPairs[c1] is set when some anchor
// starts with c1 c2. Every anchor is at least three bytes long.
var anchorPairs = func() (t [256][4]uint64) {
	set := func(a string) { t[a[0]][a[1]>>6] |= 1 << (a[1] & 63) }
	for _, a := range credentialAnchors {
		set(a)
	}
	for _, a := range []string{"be", "bE", "Be", "BE"} {
		set(a)
	}
	return t
}()

// mayHoldCredential is a cheap filter: a string with none of the anchors
// (or "bearer") cannot match any credential pattern. It reads s once,
// looking at pairs of bytes, and compares anchors only where a pair starts
// one.
func mayHoldCredential(s string) bool {
	for i := 0; i+2 < len(s); i++ {
		c, d := s[i], s[i+1]
		if anchorPairs[c][d>>6]&(1<<(d&63)) == 0 {
			continue
		}
		if c == 'b' || c == 'B' {
			if len(s)-i >= 6 && strings.EqualFold(s[i:i+6], "bearer") {
				return true
			}
			continue
		}
		for _, a := range credentialAnchors {
			if a[0] == c && a[1] == d && strings.HasPrefix(s[i:], a) {
				return true
			}
		}
	}
	return false
}

// containsFoldBearer reports whether s contains "bearer" in any ASCII case.
func containsFoldBearer(s string) bool {
	for i := 0; i+6 <= len(s); i++ {
		if c := s[i]; (c == 'b' || c == 'B') && strings.EqualFold(s[i:i+6], "bearer") {
			return true
		}
	}
	return false
}

// RedactString replaces every match of the credential patterns in s by
// "[REDACTED]" (after a Bearer or Authorization: Bearer prefix, the token
// alone) and reports whether anything was replaced. The patterns are
// stepfork's six (Bearer tokens, sk-, ghp_, gho_, github_pat_) and what
// secret scanners catch by default: GitHub's other tokens (ghu_, ghs_,
// ghr_), GitLab (glpat-) and npm (npm_) tokens, AWS access key ids (AKIA…,
// ASIA…), Google API keys (AIza…), Slack tokens (xoxb-…, xapp-…) and
// webhooks, Stripe keys (sk_live_…, rk_live_…), JSON Web Tokens, and PEM
// private-key blocks. The string "[REDACTED]" is left as it is.
func RedactString(s string) (string, bool) {
	if s == Redacted || !mayHoldCredential(s) {
		return s, false
	}
	out := redactBearer(s)
	for _, re := range credentialPatterns {
		out = re.ReplaceAllLiteralString(out, Redacted)
	}
	return out, out != s
}

// bearerPrefix is "Bearer" in any case and the white space after it.
var bearerPrefix = regexp.MustCompile(`(?i)Bearer` + pySpace + `+`)

// redactBearer replaces the token after every "Bearer" (in any case) and
// white space: a run of at least 8 of [A-Za-z0-9._~+/=-]. Python applies
// this as two regular expressions (after "Authorization:" and alone) whose
// results are the same; unlike their non-overlapping matches, every
// "Bearer" counts here, even one inside the token of another, so that a
// string joined from two redacted ones (a label "provider/model") never
// shows a token: "p-Bearer AAAAAAAA/m-Bearer BBBBBBBB" becomes
// "p-Bearer [REDACTED] [REDACTED]", not "p-Bearer [REDACTED] BBBBBBBB".
func redactBearer(s string) string {
	if !containsFoldBearer(s) {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range bearerPrefix.FindAllStringIndex(s, -1) {
		start := m[1]
		if start < last {
			continue // inside a token already replaced
		}
		end := start
		for end < len(s) && isBearerTokenByte(s[end]) {
			end++
		}
		if end-start < 8 {
			continue
		}
		b.WriteString(s[last:start])
		b.WriteString(Redacted)
		last = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isBearerTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._~+/=-", c) >= 0
}

// mayNeedRedaction is a cheap filter over canonical text: a value that passes
// neither mayHoldCredential nor hasSensitiveAnchor has neither a sensitive key
// nor a credential.
func mayNeedRedaction(s string) bool {
	return mayHoldCredential(s) || hasSensitiveAnchor(s)
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
func RedactValue(v Value) (Value, []Finding) {
	if v.IsAbsent() || !mayNeedRedaction(v.raw) {
		return v, nil
	}
	var fs []Finding
	var path pointerPath
	out := redactWalk(v, &path, &fs)
	return out, fs
}

var redactedValue = StringValue(Redacted)

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

func redactWalk(v Value, path *pointerPath, fs *[]Finding) Value {
	depth := len(*path)
	switch v.Kind() {
	case String:
		s, _ := v.Str()
		if r, ok := RedactString(s); ok {
			*fs = append(*fs, Finding{path.pointer(), ReasonCredentialPattern})
			return StringValue(r)
		}
		return v
	case Array:
		if !mayNeedRedaction(v.raw) {
			return v
		}
		var elems []Value
		changed := false
		for i, e := range v.Elems() {
			*path = append((*path)[:depth], pathSegment{idx: i, arr: true})
			r := redactWalk(e, path, fs)
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
		if !mayNeedRedaction(v.raw) {
			return v
		}
		var ms []Member
		changed := false
		n := 0
		for k, x := range v.Members() {
			*path = append((*path)[:depth], pathSegment{key: k})
			r := x
			if IsSensitiveKey(k) {
				if x != redactedValue {
					r = redactedValue
					*fs = append(*fs, Finding{path.pointer(), ReasonSensitiveKey})
				}
			} else {
				r = redactWalk(x, path, fs)
			}
			if r != x && !changed {
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
				ms = append(ms, Member{k, r})
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
// ev itself, sharing its Redactions and pointers.
func RedactEvent(ev Event) (Event, []RedactionEntry, error) {
	for _, s := range [...]string{ev.ID, ev.RunID, ev.ParentID, string(ev.Type), string(ev.Status),
		string(ev.ReplayPolicy), ev.InputHash, ev.OutputHash, string(ev.RunStatus)} {
		if _, hit := RedactString(s); hit {
			return ev, nil, ErrProtectedField
		}
	}
	for _, s := range ev.Redactions {
		if _, hit := RedactString(s); hit {
			return ev, nil, ErrProtectedField
		}
	}
	if !mayHoldCredential(ev.ErrorType) && !mayHoldCredential(ev.Key) && !mayHoldCredential(ev.Message) &&
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
			if r, ok := RedactString(*f.s); ok {
				*f.s = r
				add("/"+f.name, ReasonCredentialPattern)
			}
			continue
		}
		r, fs := RedactValue(*f.v)
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
// environment strings are redactable; run_id is protected.
func RedactManifest(m Manifest) (Manifest, []RedactionEntry, error) {
	if _, hit := RedactString(m.RunID); hit {
		return m, nil, ErrProtectedField
	}
	out := m
	var entries []RedactionEntry
	add := func(path string, p *string) {
		if r, ok := RedactString(*p); ok {
			*p = r
			entries = append(entries, RedactionEntry{ManifestEventID, path, ReasonCredentialPattern, Redacted})
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
