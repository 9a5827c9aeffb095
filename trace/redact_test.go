package trace

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestSensitiveKeys(t *testing.T) {
	t.Parallel()
	redacted := []string{"api_key", "API_KEY", "api-key", "apiKey", "accessToken", "access_token", "clientSecret",
		"client_secret", "password", "Password", "passwd", "authorization", "Authorization", "refresh_token",
		"auth_token", "secret", "private_key", "session-token", "bearerToken",
		// Separators do not count, however many there are or where they sit.
		"pass_word", "se-cret", "pass\"word", "pass\x00word", "api" + strings.Repeat("_", 40) + "key", "a.p.i.k.e.y",
		// The Kelvin sign lowercases to an ASCII k, in Go as in Python.
		"api_\u212aey",
	}
	kept := []string{"keyboard", "monkey", "primary_key", "token", "secret_key", "x-api-key", "apikeys", "passwords",
		"", "key", "auth", "authorisation", "pässword", "api_key_id", strings.Repeat("a", 100)}
	for _, k := range redacted {
		if !IsSensitiveKey(k) || !pySensitiveKey(k) {
			t.Errorf("IsSensitiveKey(%q) = %v, oracle %v; want true", k, IsSensitiveKey(k), pySensitiveKey(k))
		}
		v, fs := RedactValue(MustValueOf(map[string]any{k: "hunter2", "other": "visible"}))
		want := MustValueOf(map[string]any{k: Redacted, "other": "visible"})
		if v != want || len(fs) != 1 || fs[0] != (Finding{"/" + escapePointer(k), ReasonSensitiveKey}) {
			t.Errorf("key %q: RedactValue = %s, %v; want %s", k, v, fs, want)
		}
	}
	for _, k := range kept {
		if IsSensitiveKey(k) || pySensitiveKey(k) {
			t.Errorf("IsSensitiveKey(%q) = true; want false", k)
		}
		in := MustValueOf(map[string]any{k: "hunter2"})
		if v, fs := RedactValue(in); v != in || fs != nil {
			t.Errorf("key %q: RedactValue = %s, %v; want it unchanged", k, v, fs)
		}
	}
}

// TestSensitiveValueTypes checks that a sensitive key's value is redacted
// whatever its JSON type.
func TestSensitiveValueTypes(t *testing.T) {
	t.Parallel()
	for _, x := range []string{`1`, `1.5`, `true`, `null`, `[1,"a"]`, `{"nested":{"deep":"x"}}`, `""`} {
		in := MustParse(`{"password":` + x + `}`)
		v, fs := RedactValue(in)
		if v != MustParse(`{"password":"[REDACTED]"}`) || len(fs) != 1 {
			t.Errorf("password = %s: RedactValue = %s, %v", x, v, fs)
		}
	}
}

func TestRedactNested(t *testing.T) {
	t.Parallel()
	in := MustParse(`{"a":[{"password":"p"},{"b":{"api_key":1,"note":"Bearer abcdefghijkl"}}],"list":[[["ghp_abcdefghijkl"]]],` +
		`"a/b":{"c~d":{"api_key":"x"}},"keep":{"keyboard":"k","n":[1,2.5,null,true]}}`)
	got, fs := RedactValue(in)
	want := MustParse(`{"a":[{"password":"[REDACTED]"},{"b":{"api_key":"[REDACTED]","note":"Bearer [REDACTED]"}}],"list":[[["[REDACTED]"]]],` +
		`"a/b":{"c~d":{"api_key":"[REDACTED]"}},"keep":{"keyboard":"k","n":[1,2.5,null,true]}}`)
	if got != want {
		t.Errorf("RedactValue =\n%s\nwant\n%s", got, want)
	}
	wantFs := []Finding{
		{"/a/0/password", ReasonSensitiveKey},
		{"/a/1/b/api_key", ReasonSensitiveKey},
		{"/a/1/b/note", ReasonCredentialPattern},
		{"/a~1b/c~0d/api_key", ReasonSensitiveKey},
		{"/list/0/0/0", ReasonCredentialPattern},
	}
	if !reflect.DeepEqual(fs, wantFs) {
		t.Errorf("findings = %v\nwant       %v", fs, wantFs)
	}
}

func TestRedactString(t *testing.T) {
	t.Parallel()
	four := "a sk-abcdefghijklmnop b ghp_abcdefghijklmnop c gho_abcdefghijklmnop d github_pat_abcdefghijklmnop_XYZ e"
	cases := []struct {
		in, want string
		hit      bool
	}{
		{four, "a [REDACTED] b [REDACTED] c [REDACTED] d [REDACTED] e", true},
		{"Authorization: Bearer abc.def-ghi_jkl", "Authorization: Bearer [REDACTED]", true},
		{"authorization:bearer   xyz12345678", "authorization:bearer   [REDACTED]", true},
		{"header Bearer abcdefgh and more", "header Bearer [REDACTED] and more", true},
		{"BEARER\tabcdefgh", "BEARER\t[REDACTED]", true},
		{"Bearer\u00a0abcdefgh", "Bearer\u00a0[REDACTED]", true}, // Python's \s is Unicode-aware
		{"Bearer short", "Bearer short", false},                  // fewer than 8 characters
		{"sk-short", "sk-short", false},
		{"risk-abcdefghijkl", "risk-abcdefghijkl", false}, // no word boundary before sk-
		{"ghp_abcdefgh", "[REDACTED]", true},
		{"", "", false},
		{"काठमाडौँ ✓ naïve", "काठमाडौँ ✓ naïve", false},
		{Redacted, Redacted, false},
		{"Bearer [REDACTED]", "Bearer [REDACTED]", false},
	}
	for _, tc := range cases {
		got, hit := RedactString(tc.in)
		if got != tc.want || hit != tc.hit {
			t.Errorf("RedactString(%q) = %q, %v; want %q, %v", tc.in, got, hit, tc.want, tc.hit)
		}
	}
	got, _ := RedactString(four)
	if n := strings.Count(got, Redacted); n != 4 {
		t.Errorf("%d [REDACTED] in %q, want exactly 4", n, got)
	}
	// Inside a value, a string with four credentials is one finding.
	v, fs := RedactValue(StringValue(four))
	if s, _ := v.Str(); strings.Count(s, Redacted) != 4 || len(fs) != 1 || fs[0] != (Finding{"", ReasonCredentialPattern}) {
		t.Errorf("RedactValue(%q) = %s, %v", four, v, fs)
	}
}

func TestRedactAlreadyRedacted(t *testing.T) {
	t.Parallel()
	in := MustParse(`{"api_key":"[REDACTED]","note":"Bearer [REDACTED]","list":["[REDACTED]"]}`)
	if v, fs := RedactValue(in); v != in || len(fs) != 0 {
		t.Errorf("RedactValue = %s, %v; want no change and no finding", v, fs)
	}
}

// TestRedactDoesNotMutate checks that redaction leaves the caller's event
// and manifest alone, even a Redactions slice with spare capacity.
func TestRedactDoesNotMutate(t *testing.T) {
	t.Parallel()
	paths := make([]string, 1, 8)
	paths[0] = "/input/old"
	ev := Event{ID: "e1", RunID: "r", Type: ToolCall, Name: "t", Input: MustParse(`{"api_key":"k","q":"sk-abcdefghijkl"}`),
		Redactions: paths, Status: StatusOK, ReplayPolicy: PolicyFrozen}
	before := ev.Clone()
	out, entries, err := RedactEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ev, before) || paths[:2][1] != "" {
		t.Errorf("RedactEvent changed its argument: %+v", ev)
	}
	if want := []string{"/input/old", "/input/api_key", "/input/q"}; !slices.Equal(out.Redactions, want) {
		t.Errorf("Redactions = %v, want %v", out.Redactions, want)
	}
	if len(entries) != 2 || entries[0] != (RedactionEntry{"e1", "/input/api_key", ReasonSensitiveKey, Redacted}) ||
		entries[1] != (RedactionEntry{"e1", "/input/q", ReasonCredentialPattern, Redacted}) {
		t.Errorf("entries = %v", entries)
	}

	osName := "linux sk-abcdefghijkl"
	m := Manifest{RunID: "r", AgentName: "agent ghp_abcdefghijkl", Status: RunFailed,
		Failure: &Failure{Type: "E", Message: "timeout sk-abcdefghijkl", Step: 1}, Environment: Environment{OS: &osName}}
	mOut, mEntries, err := RedactManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if m.Failure.Message != "timeout sk-abcdefghijkl" || *m.Environment.OS != "linux sk-abcdefghijkl" || m.AgentName != "agent ghp_abcdefghijkl" {
		t.Errorf("RedactManifest changed its argument: %+v", m)
	}
	if mOut.Failure.Message != "timeout [REDACTED]" || *mOut.Environment.OS != "linux [REDACTED]" || mOut.AgentName != "agent [REDACTED]" {
		t.Errorf("RedactManifest = %+v", mOut)
	}
	var got []string
	for _, e := range mEntries {
		if e.EventID != ManifestEventID || e.Reason != ReasonCredentialPattern {
			t.Errorf("entry %+v", e)
		}
		got = append(got, e.Path)
	}
	if want := []string{"/agent_name", "/environment/os", "/failure/message"}; !slices.Equal(got, want) {
		t.Errorf("manifest paths = %v, want %v", got, want)
	}
}

func TestRedactProtectedField(t *testing.T) {
	t.Parallel()
	base := Event{ID: "e1", RunID: "r", Type: RunStart, Status: StatusOK, ReplayPolicy: PolicyFrozen, Input: NullValue}
	for name, edit := range map[string]func(*Event){
		"id":         func(e *Event) { e.ID = "evt-sk-abcdefghijkl" },
		"run_id":     func(e *Event) { e.RunID = "run ghp_abcdefghijkl" },
		"parent_id":  func(e *Event) { e.ParentID = "Bearer abcdefghijkl" },
		"redactions": func(e *Event) { e.Redactions = []string{"/gho_abcdefghijkl"} },
		"input_hash": func(e *Event) { e.InputHash = "sk-abcdefghijkl" },
	} {
		ev := base
		edit(&ev)
		if _, _, err := RedactEvent(ev); !errors.Is(err, ErrProtectedField) {
			t.Errorf("%s: RedactEvent error = %v, want ErrProtectedField", name, err)
		}
	}
	if _, _, err := RedactManifest(Manifest{RunID: "run-sk-abcdefghijkl"}); !errors.Is(err, ErrProtectedField) {
		t.Errorf("manifest run_id: error = %v, want ErrProtectedField", err)
	}
	// Save refuses such a trace and writes nothing.
	b := NewBuilder("agent")
	b.IDs(func(int) string { return "evt-sk-abcdefghijkl" })
	b.RunStart(nil)
	dst := filepath.Join(t.TempDir(), "p.sftrace")
	err := b.MustTrace().Save(dst)
	if !errors.Is(err, ErrProtectedField) || !errors.Is(err, ErrStorage) || strings.Contains(err.Error(), "abcdefghijkl") {
		t.Errorf("Save error = %v; want ErrProtectedField and ErrStorage without the secret", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Save left %s behind: %v", dst, err)
	}
}

// randomValue builds a random JSON value that often holds sensitive keys and
// credential patterns.
func randomValue(r *rand.Rand, depth int) any {
	keys := []string{"api_key", "API-KEY", "pass_word", "token", "keyboard", "a/b", "c~d", "clientSecret", "x", "é", "Authorization", ""}
	strs := []string{"plain", "sk-abcdefghijkl", "Bearer abcdefghijkl", "Authorization: Bearer x.y.z-12345678", "ghp_123456789",
		"[REDACTED]", "काठमाडौँ", "", "github_pat_abc_defghijk and gho_abcdefghij", "risk-notasecret1"}
	n := r.IntN(8)
	if depth > 3 {
		n = r.IntN(5)
	}
	switch n {
	case 0:
		return nil
	case 1:
		return r.IntN(3) == 0
	case 2:
		return r.Int64() - r.Int64()
	case 3:
		return r.NormFloat64() * 1e6
	case 4:
		return strs[r.IntN(len(strs))]
	case 5, 6:
		m := map[string]any{}
		for range r.IntN(5) {
			m[keys[r.IntN(len(keys))]] = randomValue(r, depth+1)
		}
		return m
	default:
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = randomValue(r, depth+1)
		}
		return a
	}
}

// TestRedactIdempotent is the property test of the reference: redacting
// twice is redacting once, with no findings the second time; and nothing
// sensitive is left.
func TestRedactIdempotent(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		v := MustValueOf(randomValue(r, 0))
		once, fs1 := RedactValue(v)
		twice, fs2 := RedactValue(once)
		if twice != once || len(fs2) != 0 {
			t.Fatalf("case %d: %s -> %s -> %s, findings %v", i, v, once, twice, fs2)
		}
		if (once == v) != (len(fs1) == 0) {
			t.Fatalf("case %d: findings %v but changed=%v", i, fs1, once != v)
		}
		checkNoSensitiveKey(t, once)
		for _, s := range []string{"abcdefghijkl", "x.y.z-12345678", "123456789", "gho_abcdefghij"} {
			if strings.Contains(once.Canonical(), s) {
				t.Fatalf("case %d: %q survived redaction: %s", i, s, once)
			}
		}
	}
}

// TestSecureTraceRoundTrip is the reference's test_secure_trace_roundtrip:
// secrets everywhere in a failed run; none reaches disk, redactions.json
// names the paths, integrity verifies and the stored payload hashes are those
// of the redacted payloads.
func TestSecureTraceRoundTrip(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{
		"api_key":       "sk-live-runstart0001",
		"bearer":        "bearertokenvalue0002",
		"clientSecret":  "clientsecretvalue0003",
		"response":      "sk-responsetoken0004",
		"authorization": "Basic dXNlcjpwYXNzMDAwNQ==",
		"debug":         "ghp_toolresultdebug0006",
		"error":         "sk-errormessage0007",
		"password":      "hunter2-0008",
		"refresh":       "refreshtokenvalue0009",
		"failure":       "sk-failuremessage0010",
	}
	b := NewBuilder("secure-agent")
	b.RunStart(map[string]any{"api_key": secrets["api_key"], "query": "flights to Lisbon"})
	req := b.LLMRequest("openai", "gpt-test", map[string]any{
		"messages":     []any{map[string]any{"role": "system", "content": "Authorization: Bearer " + secrets["bearer"]}},
		"clientSecret": secrets["clientSecret"],
	})
	b.LLMResponse(req, map[string]any{"text": "token: " + secrets["response"]})
	call := b.ToolCall("search", map[string]any{"authorization": secrets["authorization"], "to": "LIS"})
	res := b.ToolResult(call, map[string]any{"debug": "debug: " + secrets["debug"], "price": 320.5})
	b.Error(res, "ToolError", "upstream rejected "+secrets["error"], map[string]any{"password": secrets["password"], "code": 401})
	b.RunEnd(RunFailed, map[string]any{"refresh_token": secrets["refresh"]})
	b.tr.Failure = &Failure{Type: "TimeoutError", Message: "timeout " + secrets["failure"], Step: 5}
	tr := b.MustTrace()
	orig := tr.Clone()

	dst := filepath.Join(t.TempDir(), "secure.sftrace")
	if err := tr.Save(dst); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tr.Events, orig.Events) || !reflect.DeepEqual(tr.Manifest, orig.Manifest) {
		t.Error("Save changed the caller's trace")
	}
	files, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Errorf("bundle has %d files, want 4", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dst, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for name, s := range secrets {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("%s holds the %s secret %q", f.Name(), name, s)
			}
		}
	}

	back, err := Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range back.Redactions {
		paths = append(paths, e.EventID+" "+e.Path+" "+e.Reason)
		if e.Replacement != Redacted {
			t.Errorf("entry %+v", e)
		}
	}
	wantPaths := []string{
		"evt_001 /input/api_key sensitive_key",
		"evt_002 /input/clientSecret sensitive_key",
		"evt_002 /input/messages/0/content credential_pattern",
		"evt_003 /output/text credential_pattern",
		"evt_004 /input/authorization sensitive_key",
		"evt_005 /output/debug credential_pattern",
		"evt_006 /details/password sensitive_key",
		"evt_006 /message credential_pattern",
		"evt_007 /output/refresh_token sensitive_key",
		"__manifest__ /failure/message credential_pattern",
	}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("redactions.json entries:\n%s\nwant\n%s", strings.Join(paths, "\n"), strings.Join(wantPaths, "\n"))
	}
	if back.Failure == nil || back.Failure.Message != "timeout [REDACTED]" {
		t.Errorf("failure = %+v, want message %q", back.Failure, "timeout [REDACTED]")
	}
	if got := back.Events[1].Input.Get("messages").Canonical(); got != `[{"content":"Authorization: Bearer [REDACTED]","role":"system"}]` {
		t.Errorf("LLM messages = %s", got)
	}
	if got := back.Events[5].Redactions; !slices.Equal(got, []string{"/details/password", "/message"}) {
		t.Errorf("error event redactions = %v", got)
	}
	for i := range back.Events {
		ev := &back.Events[i]
		in, out := ev.ExpectedHashes()
		if ev.InputHash != in || ev.OutputHash != out {
			t.Errorf("event %s: stored hashes (%q, %q), recomputed (%q, %q)", ev.ID, ev.InputHash, ev.OutputHash, in, out)
		}
		for _, p := range []Value{ev.Input, ev.Output, ev.Before, ev.After, ev.Details} {
			if !p.IsAbsent() && Hash(p) != ev.InputHash && Hash(p) != ev.OutputHash {
				t.Errorf("event %s: payload %s has no matching stored hash", ev.ID, p)
			}
		}
	}
	if res := VerifyIntegrity(dst); res.Status != IntegrityVerified || len(res.VerifiedFiles) != 3 {
		t.Errorf("VerifyIntegrity = %+v", res)
	}

	// A tampered copy is a mismatch naming the file; a copy without
	// integrity.json is unverified_legacy.
	tampered := copyBundle(t, dst)
	data, _ := os.ReadFile(filepath.Join(tampered, EventsFile))
	writeBundleFile(t, tampered, EventsFile, strings.Replace(string(data), "Lisbon", "Madrid", 1))
	if res := VerifyIntegrity(tampered); res.Status != IntegrityMismatch || len(res.Issues) != 1 || res.Issues[0].File != EventsFile {
		t.Errorf("tampered: %+v", res)
	}
	legacy := copyBundle(t, dst)
	if err := os.Remove(filepath.Join(legacy, IntegrityFile)); err != nil {
		t.Fatal(err)
	}
	if res := VerifyIntegrity(legacy); res.Status != IntegrityUnverifiedLegacy {
		t.Errorf("legacy: %+v", res)
	}
	if _, err := Load(legacy); err != nil {
		t.Errorf("legacy copy does not load: %v", err)
	}
}

// copyBundle copies the regular files of a bundle into a new temporary one.
func copyBundle(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeBundleFile(t, dst, e.Name(), string(data))
	}
	return dst
}

// TestRedactionMetadataHasNoSecret checks that redactions.json holds paths
// only: no secret, no hash of one.
func TestRedactionMetadataHasNoSecret(t *testing.T) {
	t.Parallel()
	secret := "sk-metadatasecret123"
	b := NewBuilder("agent")
	b.RunStart(map[string]any{"note": secret, "password": secret})
	dst := filepath.Join(t.TempDir(), "m.sftrace")
	if err := b.MustTrace().Save(dst); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dst, RedactionsFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(secret)) || bytes.Contains(data, []byte(Hash(StringValue(secret)))) {
		t.Errorf("redactions.json holds the secret or its hash:\n%s", data)
	}
	if !bytes.Contains(data, []byte(`"/input/password"`)) {
		t.Errorf("redactions.json lacks /input/password:\n%s", data)
	}
}

// scannerCanaries are made-up credentials of every kind the credential
// patterns catch beyond stepfork's six, put together at run time so that
// this file holds none. Each is named for its kind.
func scannerCanaries() map[string]string {
	pem := "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\nVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA " + "PRIVATE KEY-----"
	return map[string]string{
		"aws access key":     "AKIA" + "IOSFODNN7EXAMPLE",
		"aws temporary key":  "ASIA" + "Y34FZKBOKMUTVV7A",
		"google api key":     "AIza" + "SyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI",
		"slack bot token":    "xoxb-" + "17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy",
		"slack user token":   "xoxp-" + "41684372915-1320496754-45609968301-e708ba56e1517a99f6b5fb07349476ef",
		"slack app token":    "xapp-" + "1-A0123456789-1234567890123-abcdef0123456789",
		"slack webhook":      "https://hooks.slack.com/" + "services/T0A1B2C3D4E/B0A1B2C3D4E/abcdefghijklmnopqrstuvwx",
		"stripe secret key":  "sk_" + "live_4eC39HqLyjWDarjtT1zdp7dc",
		"stripe restricted":  "rk_" + "live_51H8uGbCnS2dX9jQm0aZ3PqL",
		"jwt":                "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
		"unsigned jwt":       "eyJ" + "hbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.",
		"pem private key":    pem,
		"cut pem":            "-----BEGIN " + "PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
		"github user token":  "ghu_" + "16C7e42F292c6912E7710c838347Ae178B4a",
		"github server":      "ghs_" + "16C7e42F292c6912E7710c838347Ae178B4a",
		"github refresh":     "ghr_" + "1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498",
		"gitlab token":       "glpat-" + "xVzB7ZK1sYjqJ8tRfM2n",
		"npm token":          "npm_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3d",
		"bearer in a header": "Authorization: Bearer " + "c2VjcmV0LXRva2VuLXZhbHVl",
	}
}

// TestRedactScannerPatterns checks every credential pattern added to
// stepfork's six: each canary is replaced whole, alone, inside text, inside
// JSON text (as a stream of output is redacted), and the text around it is
// kept; look-alikes that are not credentials are kept.
func TestRedactScannerPatterns(t *testing.T) {
	t.Parallel()
	for name, secret := range scannerCanaries() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := Redacted
			switch {
			case strings.HasPrefix(secret, "Authorization: Bearer "):
				want = "Authorization: Bearer " + Redacted
			case strings.HasPrefix(secret, "https://"):
				want = "https://" + Redacted
			}
			if got, hit := RedactString(secret); got != want || !hit {
				t.Errorf("RedactString(%q) = %q, %v; want %q, true", secret, got, hit, want)
			}
			in := "before " + secret + " after"
			if got, _ := RedactString(in); got != "before "+want+" after" {
				t.Errorf("RedactString(%q) = %q", in, got)
			}
			// In JSON text, line breaks are escapes; the string stays well formed.
			js := StringValue("key: " + secret + `" end`).Canonical()
			got, _ := RedactString(`{"a":` + js + `}`)
			if v, err := ParseValue([]byte(got)); err != nil {
				t.Errorf("redacted JSON %s does not parse: %v", got, err)
			} else if s, _ := v.Get("a").Str(); s != "key: "+want+`" end` {
				t.Errorf("redacted JSON string = %q, want %q", s, "key: "+want+`" end`)
			}
		})
	}
	for _, keep := range []string{
		"AKIAshort", "the AKIA prefix", "aiza", "AIzaShort", "xoxb-short", "sk_live_", "sk_other_abcdefghijklmnop",
		"eyJhbGciOiJIUzI1NiJ9", "-----BEGIN PUBLIC KEY-----", "npm_install", "glpat-short", "hooks.slack.com/",
		"MAKIAIOSFODNN7EXAMPLEX",
	} {
		if got, hit := RedactString(keep); hit || got != keep {
			t.Errorf("RedactString(%q) = %q, %v; want it kept", keep, got, hit)
		}
	}
}

// TestRedactBearerJoined checks that a Bearer token is redacted even when
// it follows another Bearer token's characters, as in a label joined from
// two strings, which non-overlapping regular expression matches miss.
func TestRedactBearerJoined(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"p-Bearer AAAAAAAA/m-Bearer BBBBBBBB", "p-Bearer [REDACTED] [REDACTED]"},
		{"Authorization: Bearer abcdefgh Bearer 12345678", "Authorization: Bearer [REDACTED] Bearer [REDACTED]"},
		{"bearer abcdefgh/bearer short", "bearer [REDACTED] short"},
		{"Bearer Bearer abcdefgh", "Bearer Bearer [REDACTED]"},
	}
	for _, tc := range cases {
		if got, _ := RedactString(tc.in); got != tc.want {
			t.Errorf("RedactString(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRedactedValue checks that the value written in place of a redacted
// one, which the package spells out rather than quoting at start-up, is
// what StringValue makes of Redacted.
func TestRedactedValue(t *testing.T) {
	t.Parallel()
	if want := StringValue(Redacted); redactedValue != want {
		t.Errorf("redactedValue = %s, want %s", redactedValue.Canonical(), want.Canonical())
	}
}
