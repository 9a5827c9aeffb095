package trace

import (
	"encoding/base64"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
)

// Credentials in free text: the patterns RedactString replaces.
//
// A credential is found wherever it sits: glued to the word before it
// ("run_ghp_…", "9AKIA…", "\nghp_…" in JSON text, where an escape ends
// just before it), after an escape, inside a URL. Prefixes that ordinary
// words also hold (sk-, sk_live_) need the shape of a key when glued to a
// word: "ask-proj-…" is a key, "task-runner-service" is not.
//
// Each pattern runs only on text that holds one of its anchors: a filter
// reads the text once, comparing pairs of bytes against the anchors' first
// two (anchorMask), and tells which patterns may match.

// Python's \s and \b are Unicode-aware; RE2's are ASCII. The space class below
// covers every character Python's \s matches, so Go redacts at least what
// Python does.
const pySpace = `[\s\x{1c}-\x{1f}\x{85}\p{Z}]`

// pemBody is what may stand between the lines of a PEM block: base64, the
// headers of an encrypted key, line breaks, and the escapes \n, \r, \t that
// stand for line breaks in JSON or escaped output (never \" or \\, so a
// redacted block inside a JSON string leaves the string well formed).
const pemBody = `(?:[A-Za-z0-9+/=\s:,.-]|\\[nrt])`

// pemCut is what the rest of a PEM block cut short may hold: base64 and
// line breaks, so that the text after it is kept.
const pemCut = `(?:[A-Za-z0-9+/=\r\n]|\\[nrt])`

// credentialPattern is one pattern of credentials.
type credentialPattern struct {
	re *regexp.Regexp
	// glued, when not nil, decides whether a match that follows a letter,
	// a digit or '_' is still a credential.
	glued func(match string) bool
	// group is the bit of the pattern's anchors in anchorMask.
	group uint32
}

// Anchor groups: the bits of anchorMask.
const (
	gSK uint32 = 1 << iota
	gGitHub
	gGitLab
	gNPM
	gAWS
	gGoogle
	gSlack
	gStripe
	gJWT
	gPEM
	gHF
	gBearer
	gBasic
	gURL
	gDSN
	gKV // a key that names a secret, and '=' or ':' (not from anchorMask)
)

// credentialAnchors are substrings of which every match of a credential
// pattern holds one, with the group of the patterns they anchor. "bearer"
// and "basic" match in any case. "://" and the DSN anchors count only
// where userinfo with a password follows (see urlHasPassword).
var credentialAnchors = []struct {
	s     string
	group uint32
}{
	{"sk-", gSK}, {"ghp_", gGitHub}, {"gho_", gGitHub}, {"github_pat_", gGitHub}, {"ghu_", gGitHub},
	{"ghs_", gGitHub}, {"ghr_", gGitHub}, {"glpat-", gGitLab}, {"npm_", gNPM},
	{"A3T", gAWS}, {"AKIA", gAWS}, {"ASIA", gAWS}, {"ABIA", gAWS}, {"ACCA", gAWS}, {"AGPA", gAWS},
	{"AIDA", gAWS}, {"AROA", gAWS}, {"AIPA", gAWS}, {"ANPA", gAWS}, {"ANVA", gAWS}, {"APKA", gAWS},
	{"AIza", gGoogle}, {"xox", gSlack}, {"xapp-", gSlack}, {"hooks.slack.com", gSlack},
	{"sk_", gStripe}, {"rk_", gStripe}, {"eyJ", gJWT}, {"PRIVATE KEY", gPEM}, {"hf_", gHF},
	{"://", gURL}, {"@tcp(", gDSN}, {"@unix(", gDSN},
}

// caseless are the anchors matched in any ASCII case.
var caseless = []struct {
	s     string
	group uint32
}{{"bearer", gBearer}, {"basic", gBasic}}

// anchorTables are anchorMask's filters, built on first use rather than
// when every program that links package trace starts (most never redact).
type anchorTables struct {
	// pairs is a filter of the first two bytes of the anchors: bit c2 of
	// pairs[c1] is set when some anchor starts with c1 c2 (every anchor is
	// at least three bytes long), or when c1 c2 end a key that names a
	// secret (kvEnds).
	pairs, kvEnds [256][4]uint64
	// byFirst lists the anchors by their first byte.
	byFirst [256][]int
}

var (
	anchorsOnce  sync.Once
	anchorsBuilt atomic.Pointer[anchorTables]
)

// anchors returns the anchor tables, building them on first use. It is
// inlined: once they are built, it costs anchorMask one load.
func anchors() *anchorTables {
	if at := anchorsBuilt.Load(); at != nil {
		return at
	}
	return buildAnchors()
}

func buildAnchors() *anchorTables {
	anchorsOnce.Do(func() { anchorsBuilt.Store(newAnchorTables()) })
	return anchorsBuilt.Load()
}

func newAnchorTables() *anchorTables {
	at := new(anchorTables)
	set := func(t *[256][4]uint64, a string) { t[a[0]][a[1]>>6] |= 1 << (a[1] & 63) }
	anyCase := func(t *[256][4]uint64, a string) {
		for _, c1 := range []byte{a[0], a[0] - 'a' + 'A'} {
			for _, c2 := range []byte{a[1], a[1] - 'a' + 'A'} {
				set(t, string([]byte{c1, c2}))
			}
		}
	}
	for _, a := range credentialAnchors {
		set(&at.pairs, a.s)
	}
	for _, a := range caseless {
		anyCase(&at.pairs, a.s)
	}
	for _, suf := range secretKeySuffixes {
		anyCase(&at.pairs, suf[len(suf)-2:])
		anyCase(&at.kvEnds, suf[len(suf)-2:])
	}
	for i, a := range credentialAnchors {
		at.byFirst[a.s[0]] = append(at.byFirst[a.s[0]], i)
	}
	return at
}

func pairIn(t *[256][4]uint64, c, d byte) bool { return t[c][d>>6]&(1<<(d&63)) != 0 }

// anchorMask reads s once and returns the groups of the anchors it holds:
// a pattern whose group is not set cannot match s. gKV is set when a
// key=value secret is there (nextKeyValue finds one).
func anchorMask(s string) uint32 { return anchorBits(s) &^ gMissed }

// gMissed is set by anchorBits when an anchor that needs a look around it
// ("://", "@tcp(", "basic", a key that names a secret) is there without
// what it needs: what an escape in JSON text may hide (mayHoldCredentialJSON).
const gMissed uint32 = 1 << 31

// anchorBits is anchorMask with gMissed.
func anchorBits(s string) uint32 {
	at := anchors()
	var mask uint32
	for i := 0; i+1 < len(s); i++ {
		c, d := s[i], s[i+1]
		if !pairIn(&at.pairs, c, d) {
			continue
		}
		if mask&gKV == 0 && pairIn(&at.kvEnds, c, d) {
			if keyValueAt(s, i+2) {
				mask |= gKV
			} else if (i+2 == len(s) || !isKeyByte(s[i+2])) && secretKeyBefore(s, i+2) {
				mask |= gMissed // a key that names a secret, without a value
			}
		}
		if i+2 >= len(s) {
			break
		}
		if c|0x20 == 'b' {
			if len(s)-i >= 6 && strings.EqualFold(s[i:i+6], "bearer") {
				mask |= gBearer
			} else if len(s)-i >= 5 && strings.EqualFold(s[i:i+5], "basic") {
				if basicAt(s, i+5) > 0 {
					mask |= gBasic
				} else {
					mask |= gMissed
				}
			}
			continue
		}
		for _, k := range at.byFirst[c] {
			a := &credentialAnchors[k]
			if a.s[1] != d || !strings.HasPrefix(s[i:], a.s) {
				continue
			}
			switch a.group {
			case gURL:
				if userinfoPassword(s, i+3) < 0 {
					mask |= gMissed
					continue
				}
			case gDSN:
				if dsnPassword(s, i) < 0 {
					mask |= gMissed
					continue
				}
			}
			mask |= a.group
		}
	}
	return mask
}

// mayHoldCredential is a cheap filter: a string for which it is false
// cannot match any credential pattern or hold a key=value secret.
func mayHoldCredential(s string) bool { return anchorMask(s) != 0 }

// credentialPatterns are the credential patterns, in the order they are
// applied: stepfork's (sk-, ghp_, gho_, github_pat_; its Bearer patterns are
// redactBearer) and the common ones of secret scanners' default rules
// (gitleaks, GitHub secret scanning).
var credentialPatterns = sync.OnceValue(func() []credentialPattern {
	// Compiled on first use, not when the package is initialized: a
	// process that never redacts (stepfork validate) does not pay for it.
	return []credentialPattern{
		{re: regexp.MustCompile(`sk-[A-Za-z0-9_-]{8,}`), glued: func(m string) bool { return keyShaped(m[len("sk-"):]) }, group: gSK},
		{re: regexp.MustCompile(`(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{8,}`), group: gGitHub},
		{re: regexp.MustCompile(`github_pat_[A-Za-z0-9_]{8,}`), group: gGitHub},
		// GitLab personal access tokens.
		{re: regexp.MustCompile(`glpat-[A-Za-z0-9_-]{20,}`), group: gGitLab},
		// npm access tokens.
		{re: regexp.MustCompile(`npm_[A-Za-z0-9]{36}`), group: gNPM},
		// AWS: a secret access key right after its access key id (as in a
		// credentials file or CSV), then access key ids alone: long-term
		// (AKIA), temporary (ASIA), and the other kinds' prefixes. An id is
		// 20 characters: a longer run of capitals is not one.
		{re: regexp.MustCompile(`(?:AKIA|ASIA)[A-Z0-9]{16}[\s,;:|"'=]{1,8}[A-Za-z0-9/+]{40}\b`), group: gAWS},
		{re: regexp.MustCompile(`(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}\b`), group: gAWS},
		// Google API keys.
		{re: regexp.MustCompile(`AIza[A-Za-z0-9_-]{35}`), group: gGoogle},
		// Slack tokens (bot, user, app-level, refresh, configuration) and
		// incoming webhooks.
		{re: regexp.MustCompile(`xox[abeoprs]-[A-Za-z0-9-]{10,}`), group: gSlack},
		{re: regexp.MustCompile(`xapp-[A-Za-z0-9-]{10,}`), group: gSlack},
		{re: regexp.MustCompile(`hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{16,}`), group: gSlack},
		// Stripe secret and restricted keys.
		{re: regexp.MustCompile(`(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,}`), glued: func(m string) bool {
			return keyShaped(m[4+strings.IndexByte(m[3:], '_'):]) // after sk_live_
		}, group: gStripe},
		// JSON Web Tokens: a header and a payload that are base64url JSON
		// objects, and a signature (empty for an unsigned token).
		{re: regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`), group: gJWT},
		// PEM private keys, from the BEGIN line to the END line, or to the end
		// of what looks like the key when the block is cut short.
		{re: regexp.MustCompile(`-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:` + pemBody + `*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|` + pemCut + `*)`), group: gPEM},
		// Hugging Face access tokens.
		{re: regexp.MustCompile(`hf_[A-Za-z0-9]{30,}`), group: gHF},
	}
})

// keyShaped is the test of a token glued to a word (its part after the
// prefix): a known kind of key (sk-proj-…, sk-ant-…), or 20 characters or
// more mixing capitals, small letters and digits, as random keys do and
// words do not.
func keyShaped(rest string) bool {
	for _, kind := range []string{"proj-", "ant-", "svcacct-", "admin-"} {
		if strings.HasPrefix(rest, kind) {
			return true
		}
	}
	return len(rest) >= 20 && mixesCase(rest)
}

// mixesCase reports whether s holds a capital, a small letter and a digit.
func mixesCase(s string) bool {
	var up, low, dig bool
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'A' && c <= 'Z':
			up = true
		case c >= 'a' && c <= 'z':
			low = true
		case c >= '0' && c <= '9':
			dig = true
		}
	}
	return up && low && dig
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// replace replaces the matches of p in s by "[REDACTED]".
func (p *credentialPattern) replace(s string) string {
	if p.glued == nil {
		return p.re.ReplaceAllLiteralString(s, Redacted)
	}
	var b strings.Builder
	last := 0
	for _, m := range p.re.FindAllStringIndex(s, -1) {
		if m[0] > 0 && isWordByte(s[m[0]-1]) && !p.glued(s[m[0]:m[1]]) {
			continue
		}
		b.WriteString(s[last:m[0]])
		b.WriteString(Redacted)
		last = m[1]
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// RedactString replaces every credential in s by "[REDACTED]" and reports
// whether anything was replaced. It finds:
//
//   - stepfork's patterns: Bearer tokens (the token after "Bearer", in any
//     case, alone or after "Authorization:"), sk-, ghp_, gho_, github_pat_;
//   - what secret scanners catch by default: GitHub's other tokens (ghu_,
//     ghs_, ghr_), GitLab (glpat-), npm (npm_) and Hugging Face (hf_)
//     tokens, AWS access key ids (AKIA…, ASIA…) and a secret access key
//     that follows one, Google API keys (AIza…), Slack tokens (xoxb-…,
//     xapp-…) and webhooks, Stripe keys (sk_live_…, rk_live_…), JSON Web
//     Tokens, PEM private-key blocks;
//   - HTTP Basic credentials ("Basic " and base64 of user:password), the
//     password of a URL's userinfo (postgres://user:PASSWORD@host, any
//     scheme) and of a Go MySQL DSN (user:PASSWORD@tcp(host)/db);
//   - the value after a key that names a secret, in free text:
//     api_key=…, access_token: …, "password": "…", AccountKey=… (Azure),
//     aws_secret_access_key=…, client_secret=…; with ':' and a bare key, a
//     value of six characters or more holding a digit or a symbol (so
//     "the secret: nobody knows" is kept).
//
// A credential is found glued to the text before it ("run_ghp_…"), except
// that sk- and Stripe prefixes glued to a word need the shape of a key
// ("ask-proj-…" yes, "task-runner-service" no). "[REDACTED]" is left as it
// is: redacting a redacted string finds nothing.
//
// Scrubbers, when given, are applied after the patterns, in order (see
// [Scrubber]).
func RedactString(s string, scrub ...Scrubber) (string, bool) {
	if len(scrub) > 0 {
		r, reason := scrubString(s, scrub)
		return r, reason != ""
	}
	return redactCredentials(s)
}

// redactCredentials is RedactString without scrubbers.
func redactCredentials(s string) (string, bool) {
	if s == Redacted {
		return s, false
	}
	mask := anchorMask(s) // before the patterns: "api_key=sk-…" is a key=value secret
	if mask == 0 {
		return s, false
	}
	out := s
	if mask&gBearer != 0 {
		out = redactBearer(out)
	}
	if mask&gBasic != 0 {
		out = redactBasic(out)
	}
	patterns := credentialPatterns()
	for i := range patterns {
		if p := &patterns[i]; mask&p.group != 0 {
			out = p.replace(out)
		}
	}
	if mask&gURL != 0 {
		out = redactUserinfo(out)
	}
	if mask&gDSN != 0 {
		out = redactDSN(out)
	}
	if mask&gKV != 0 {
		out = redactKeyValues(out)
	}
	return out, out != s
}

// bearerPrefix is "Bearer" in any case and the white space after it.
var bearerPrefix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)Bearer` + pySpace + `+`) })

// redactBearer replaces the token after every "Bearer" (in any case) and
// white space: a run of at least 8 of [A-Za-z0-9._~+/=-]. Python applies
// this as two regular expressions (after "Authorization:" and alone) whose
// results are the same; unlike their non-overlapping matches, every
// "Bearer" counts here, even one inside the token of another, so that a
// string joined from two redacted ones (a label "provider/model") never
// shows a token: "p-Bearer AAAAAAAA/m-Bearer BBBBBBBB" becomes
// "p-Bearer [REDACTED] [REDACTED]", not "p-Bearer [REDACTED] BBBBBBBB".
func redactBearer(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range bearerPrefix().FindAllStringIndex(s, -1) {
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

// basicAt returns the length of the HTTP Basic credentials that follow
// "Basic" at s[i:] (white space, then base64 of "user:password"), or 0.
func basicAt(s string, i int) int {
	j := i
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	if j == i {
		return 0
	}
	k := j
	for k < len(s) && (isBase64Byte(s[k])) {
		k++
	}
	for n := 0; n < 2 && k < len(s) && s[k] == '='; n++ {
		k++
	}
	tok := strings.TrimRight(s[j:k], "=")
	if len(tok) < 8 || len(tok)%4 == 1 {
		return 0
	}
	dec, err := base64.RawStdEncoding.DecodeString(tok)
	if err != nil || !strings.Contains(string(dec), ":") {
		return 0
	}
	return k - i
}

func isBase64Byte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/'
}

// redactBasic replaces the base64 of HTTP Basic credentials after every
// "Basic" (in any case), keeping "Basic " itself.
func redactBasic(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i+5 <= len(s); i++ {
		if s[i]|0x20 != 'b' || !strings.EqualFold(s[i:i+5], "basic") {
			continue
		}
		n := basicAt(s, i+5)
		if n == 0 {
			continue
		}
		start := i + 5
		for s[start] == ' ' || s[start] == '\t' {
			start++
		}
		b.WriteString(s[last:start])
		b.WriteString(Redacted)
		last = i + 5 + n
		i = last - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// userinfoPassword returns the offset of the password in the userinfo of
// the URL whose authority starts at s[i:] (just after "://"), or -1 when
// it has none.
func userinfoPassword(s string, i int) int {
	colon := -1
	for j := i; j < len(s); j++ {
		switch c := s[j]; c {
		case '@':
			if colon < 0 || colon+1 == j || strings.HasPrefix(s[colon+1:], Redacted+"@") {
				return -1
			}
			return colon + 1
		case ':':
			if colon < 0 {
				colon = j
			}
		case '/', '?', '#', ' ', '\t', '\r', '\n', '"', '\'', '<', '>', '\\', '`':
			return -1
		}
	}
	return -1
}

// redactUserinfo replaces the password of every URL's userinfo
// (scheme://user:PASSWORD@host).
func redactUserinfo(s string) string {
	var b strings.Builder
	last := 0
	for i := strings.Index(s, "://"); i >= 0; {
		at := i + 3
		if p := userinfoPassword(s, at); p >= 0 {
			end := p + strings.IndexByte(s[p:], '@')
			b.WriteString(s[last:p])
			b.WriteString(Redacted)
			last = end
			at = end
		}
		j := strings.Index(s[at:], "://")
		if j < 0 {
			break
		}
		i = at + j
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// dsnPassword returns the offset of the password of a Go MySQL DSN
// (user:PASSWORD@tcp(…)) whose '@' is at s[at], or -1.
func dsnPassword(s string, at int) int {
	for j := at - 1; j >= 0; j-- {
		switch c := s[j]; {
		case c == ':':
			if j+1 == at || strings.HasPrefix(s[j+1:], Redacted+"@") {
				return -1
			}
			return j + 1
		case c == ' ' || c == '\t' || c == '\n' || c == '"' || c == '\'' || c == '/' || c == '@' || c == '\\' || c == '=':
			return -1
		}
	}
	return -1
}

// redactDSN replaces the password of every Go MySQL DSN.
func redactDSN(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '@' || !(strings.HasPrefix(s[i:], "@tcp(") || strings.HasPrefix(s[i:], "@unix(")) {
			continue
		}
		p := dsnPassword(s, i)
		if p < last || p < 0 {
			continue
		}
		b.WriteString(s[last:p])
		b.WriteString(Redacted)
		last = i
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// secretKeySuffixes end the keys that name a secret in free text, once
// normalized as IsSensitiveKey normalizes a key: db_password, x-api-key,
// aws_secret_access_key, AccountKey (Azure storage) and SharedAccessKey.
var secretKeySuffixes = []string{
	"apikey", "apitoken", "accesstoken", "refreshtoken", "authtoken", "sessiontoken", "bearertoken",
	"password", "passwd", "secret", "privatekey", "secretkey", "accesskey", "accountkey",
}

// namesSecret reports whether the key, normalized, ends with one of
// secretKeySuffixes.
func namesSecret(key string) bool {
	var buf [64]byte
	n := len(buf)
	for i := len(key) - 1; i >= 0 && n > 0; i-- {
		c := key[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
		default:
			continue
		}
		n--
		buf[n] = c
	}
	norm := string(buf[n:])
	for _, suf := range secretKeySuffixes {
		if strings.HasSuffix(norm, suf) {
			return true
		}
	}
	return false
}

// secretKeyBefore reports whether the key that ends at s[end] names a
// secret.
func secretKeyBefore(s string, end int) bool {
	k := end
	for k > 0 && isKeyByte(s[k-1]) {
		k--
	}
	return namesSecret(s[k:end])
}

func isKeyByte(c byte) bool { return isWordByte(c) || c == '-' || c == '.' }

// redactKeyValues replaces the value after every key that names a secret
// and '=' or ':' (see RedactString).
func redactKeyValues(s string) string {
	var b strings.Builder
	last := 0
	for {
		start, end, repl := nextKeyValue(s, last)
		if start < 0 {
			break
		}
		b.WriteString(s[last:start])
		b.WriteString(repl)
		last = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// nextKeyValue finds the first secret value at or after s[from:] that
// follows a key naming a secret and '=' or ':', or returns -1, and what
// replaces it: "[REDACTED]", in the quotes of the key when the key is
// quoted and the value is not (a number in JSON text), so that JSON text
// stays JSON.
func nextKeyValue(s string, from int) (start, end int, repl string) {
	kvEnds := &anchors().kvEnds
	for i := from; i < len(s); i++ {
		k := strings.IndexAny(s[i:], "=:")
		if k < 0 {
			break
		}
		i += k
		c := s[i]
		if c == ':' && strings.HasPrefix(s[i:], "://") {
			continue
		}
		// The key: identifier characters before the separator, maybe in
		// quotes (escaped ones in JSON text), maybe with spaces between.
		j := i
		for j > from && (s[j-1] == ' ' || s[j-1] == '\t') {
			j--
		}
		keyQuote := ""
		if j > from && (s[j-1] == '"' || s[j-1] == '\'') {
			keyQuote = s[j-1 : j]
			j--
			if j > from && s[j-1] == '\\' {
				keyQuote = s[j-1 : j+1]
				j--
			}
		}
		k = j
		for k > from && isKeyByte(s[k-1]) {
			k--
		}
		if j-k < 2 || !pairIn(kvEnds, s[j-2], s[j-1]) || !namesSecret(s[k:j]) {
			continue
		}
		if start, end, valueQuoted, ok := secretValue(s, i+1, c == '=' || keyQuote != "", keyQuote); ok {
			if valueQuoted || keyQuote == "" {
				return start, end, Redacted
			}
			return start, end, keyQuote + Redacted + keyQuote
		}
	}
	return -1, -1, ""
}

// keyValueAt reports whether a key that names a secret ends at s[end] and
// a secret value follows it, as nextKeyValue finds them.
func keyValueAt(s string, end int) bool {
	j := end
	quote := ""
	if j+1 < len(s) && s[j] == '\\' && s[j+1] == '"' {
		quote = s[j : j+2]
	} else if j < len(s) && (s[j] == '"' || s[j] == '\'') {
		quote = s[j : j+1]
	}
	j += len(quote)
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	if j >= len(s) || s[j] != '=' && s[j] != ':' || strings.HasPrefix(s[j:], "://") {
		return false
	}
	if !secretKeyBefore(s, end) {
		return false
	}
	_, _, _, ok := secretValue(s, j+1, s[j] == '=' || quote != "", quote)
	return ok
}

// secretValue finds the value that starts at s[i:], after white space: a
// string in the quotes of its key (keyQuote: ", \" in JSON text's string,
// or '), or in single quotes, to its closing quote; otherwise a run up to
// white space, a quote or a delimiter, after a double quote if there is
// one (which may close the string of JSON text rather than open a value,
// so a value of free text in double quotes counts to its first space). A
// value that is empty, redacted already, a JSON literal or the start of an
// object or an array is not one. Unless strong, the value must look like
// a secret: six characters or more, with a digit or a symbol.
func secretValue(s string, i int, strong bool, keyQuote string) (start, end int, quoted, ok bool) {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	var quote string
	switch {
	case keyQuote != "" && strings.HasPrefix(s[i:], keyQuote):
		quote = keyQuote
	case i < len(s) && s[i] == '\'':
		quote = "'"
	case i < len(s) && s[i] == '"':
		if i++; i < len(s) && s[i] == ':' {
			return 0, 0, false, false // a key of JSON text ends with the separator
		}
	}
	start = i + len(quote)
	end = start
	if quote != "" {
		if end = closingQuote(s, start, quote); end < 0 {
			return 0, 0, false, false
		}
	} else {
		for end < len(s) && !strings.ContainsRune(" \t\r\n\"'&;,<>(){}[]\\`", rune(s[end])) {
			end++
		}
	}
	v := s[start:end]
	switch {
	case v == "" || strings.HasPrefix(v, Redacted) || v == "null" || v == "true" || v == "false":
		return 0, 0, false, false
	case quote == "" && start < len(s) && (s[start] == '{' || s[start] == '['):
		return 0, 0, false, false
	case !strong && (len(v) < 6 || !strings.ContainsFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	})):
		return 0, 0, false, false
	}
	return start, end, quote != "", true
}

// closingQuote returns the offset of the quote that closes a string
// opened by quote just before s[start], or -1. A backslash escapes the
// byte after it; inside JSON text's string (quote \"), the string is that
// of the text's escapes read once, with a backslash of its own.
func closingQuote(s string, start int, quote string) int {
	if quote != `\"` {
		for k := start; k < len(s); k++ {
			switch s[k] {
			case '\\':
				k++
			case quote[0]:
				return k
			case '"':
				return -1 // the end of the string of JSON text
			}
		}
		return -1
	}
	inner := false // the inner string's backslash escapes the next character
	for k := start; k < len(s); k++ {
		c, escaped := s[k], false
		if c == '\\' && k+1 < len(s) {
			c, escaped = s[k+1], true
			k++
		} else if c == '"' {
			return -1 // the end of the outer string
		}
		switch {
		case inner:
			inner = false
		case c == '\\':
			inner = true
		case c == '"' && escaped:
			return k - 1
		}
	}
	return -1
}
