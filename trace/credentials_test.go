package trace

import (
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"testing"
)

// TestRedactGlued checks that a credential is redacted whatever is glued
// before it (a word, an escape of JSON text, a digit), that prefixes words
// also hold need the shape of a key when glued, and that look-alikes are
// kept.
func TestRedactGlued(t *testing.T) {
	t.Parallel()
	ghp := "ghp_" + "R2d2C3poBb8Ewok5Yoda9Luke"
	cases := []struct{ in, want string }{
		{"run_" + ghp, "run_" + Redacted},
		{"x_" + ghp + " tail", "x_" + Redacted + " tail"},
		{`"agent_name":"a\n` + ghp + `"`, `"agent_name":"a\n` + Redacted + `"`},
		{"9AKIA" + "QYLPMN5HHHFPZAM2", "9" + Redacted},
		{"ask-" + "proj-Zx81kQmW2vLp9TnB4cYd", "a" + Redacted},
		{"zeyJ" + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig", "z" + Redacted},
		{"task" + "-sk-" + "Zx81kQmW2vLp9TnB4cYdQ", "ta" + Redacted},
		{"id" + "sk_" + "live_4eC39HqLyjWDarjtT1zdp7dc", "id" + Redacted},
		{"tool-" + "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "tool-" + Redacted},
		// Not credentials: words with the prefixes glued.
		{"task-runner-service", "task-runner-service"},
		{"risk-assessment-2024-quarterly-report", "risk-assessment-2024-quarterly-report"},
		{"disk_test_environment", "disk_test_environment"},
		{"MAKIAIOSFODNN7EXAMPLEX", "MAKIAIOSFODNN7EXAMPLEX"},
	}
	for _, tc := range cases {
		if got, _ := RedactString(tc.in); got != tc.want {
			t.Errorf("RedactString(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRedactNewKinds checks the credentials beyond tokens with a prefix:
// HTTP Basic, URL userinfo, DSNs, key=value secrets in free text, AWS
// secret keys, Azure account keys; and what stays.
func TestRedactNewKinds(t *testing.T) {
	t.Parallel()
	basic := base64.StdEncoding.EncodeToString([]byte("alice:" + "s3cr3t-pw"))
	awsSecret := "wJalrXUtnFEMI" + "/K7MDENG/bPxRfiCYEXAMPLEKEY"
	cases := []struct{ in, want string }{
		{"Authorization: Basic " + basic, "Authorization: Basic " + Redacted},
		{"curl -H 'authorization: basic " + basic + "'", "curl -H 'authorization: basic " + Redacted + "'"},
		{"see https://bob:" + "hunter2pw@example.com/x", "see https://bob:" + Redacted + "@example.com/x"},
		{"postgres://app:" + "Pa55word@db:5432/orders?sslmode=disable", "postgres://app:" + Redacted + "@db:5432/orders?sslmode=disable"},
		{"mongodb+srv://u:" + "p4ss@cluster0.x.net", "mongodb+srv://u:" + Redacted + "@cluster0.x.net"},
		{"dsn root:" + "t0psecret@tcp(127.0.0.1:3306)/app", "dsn root:" + Redacted + "@tcp(127.0.0.1:3306)/app"},
		{"call with api_key=" + "abc123def", "call with api_key=" + Redacted},
		{"GET /v1?access_token=" + "xyz789&page=2", "GET /v1?access_token=" + Redacted + "&page=2"},
		{`{"password": "` + "hunter2" + `"}`, `{"password": "` + Redacted + `"}`},
		{`{\"client_secret\":\"` + "q9w8e7" + `\"}`, `{\"client_secret\":\"` + Redacted + `\"}`},
		{"my password: " + "hunter2", "my password: " + Redacted},
		{"aws_secret_access_key = " + awsSecret, "aws_secret_access_key = " + Redacted},
		{"AKIA" + "QYLPMN5HHHFPZAM2," + awsSecret, Redacted},
		{"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + "c2VjcmV0a2V5MTIzNDU2Nzg5MA==;EndpointSuffix=core.windows.net",
			"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + Redacted + ";EndpointSuffix=core.windows.net"},
		{"export HF_TOKEN=" + "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "export HF_TOKEN=" + Redacted},
		// Kept.
		{"Basic information about the order", "Basic information about the order"},
		{"https://example.com/a:b@c", "https://example.com/a:b@c"},
		{"mailto:alice@example.com", "mailto:alice@example.com"},
		{"The secret: nobody knows", "The secret: nobody knows"},
		{"max_tokens=256 total_tokens: 12", "max_tokens=256 total_tokens: 12"},
		{`{"api_key": null, "secret": {"a": 1}}`, `{"api_key": null, "secret": {"a": 1}}`},
		{"commit da39a3ee5e6b4b0d3255bfef95601890afd80709", "commit da39a3ee5e6b4b0d3255bfef95601890afd80709"},
		{"Authorization: Bearer [REDACTED]", "Authorization: Bearer [REDACTED]"},
		{"password=[REDACTED]", "password=[REDACTED]"},
	}
	for _, tc := range cases {
		got, hit := RedactString(tc.in)
		if got != tc.want || hit != (tc.in != tc.want) {
			t.Errorf("RedactString(%q) = %q, %v; want %q", tc.in, got, hit, tc.want)
		}
		if again, hit := RedactString(got); hit || again != got {
			t.Errorf("RedactString(%q) again = %q, %v; want it unchanged", got, again, hit)
		}
	}
}

// TestRedactObjectKeys checks that a credential used as an object key is
// redacted, the member kept under a unique redacted key, and the finding's
// path holds no secret.
func TestRedactObjectKeys(t *testing.T) {
	t.Parallel()
	pem := "-----BEGIN " + "PRIVATE KEY-----MIIEvQIBADANBgkqhkiG9w0BAQEFAASC-----END PRIVATE KEY-----"
	ghp := "ghp_" + "R2d2C3poBb8Ewok5Yoda9Luke"
	in := MustValueOf(map[string]any{pem: 1, ghp: map[string]any{"x": 2}, "[REDACTED]": 3, "plain": "ok"})
	got, fs := RedactValue(in)
	if strings.Contains(got.Canonical(), "MIIEvQ") || strings.Contains(got.Canonical(), "R2d2C3po") {
		t.Fatalf("RedactValue = %s: a key still holds a secret", got)
	}
	if n := got.Len(); n != 4 {
		t.Errorf("RedactValue = %s: %d members, want 4", got, n)
	}
	for _, f := range fs {
		if strings.Contains(f.Path, "MIIEvQ") || strings.Contains(f.Path, "R2d2") {
			t.Errorf("finding %v holds the secret", f)
		}
	}
	if len(fs) != 2 {
		t.Errorf("findings = %v, want 2", fs)
	}
	if again, fs := RedactValue(got); again != got || len(fs) != 0 {
		t.Errorf("RedactValue again = %s, %v", again, fs)
	}
}

// FuzzRedactString checks RedactString on any text: it is idempotent, it
// changes nothing the filter passes over (in strings and bytes alike), and
// JSON text stays JSON, the same value with the secrets of its strings
// replaced, as the CLI's last pass over its output needs.
func FuzzRedactString(f *testing.F) {
	for _, s := range []string{
		"run_ghp_R2d2C3poBb8Ewok5Yoda9Luke", "ask-proj-Zx81kQmW2vLp9TnB4cYd", "Authorization: Basic YWxpY2U6czNjcjN0",
		"postgres://app:Pa55word@db:5432/x", "root:pw@tcp(h:1)/d", `{"password": "hunter2"}`, `api_key=abc&x=1`,
		"AccountKey=c2VjcmV0;x", "my password: hunter2", `{\"client_secret\":\"q9\"}`, "Bearer abcdefghij",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, hit := RedactString(s)
		if hit != (r != s) {
			t.Fatalf("RedactString(%q) = %q, %v", s, r, hit)
		}
		if again, hit := RedactString(r); hit || again != r {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, r, again)
		}
		if !mayHoldCredential(s) && hit {
			t.Fatalf("RedactString(%q) = %q, but the filter passes over it", s, r)
		}
		// The string of JSON text (invalid UTF-8 is replaced there).
		js := StringValue(s).Canonical()
		if str, _ := StringValue(s).Str(); !mayHoldCredentialJSON(js) || !mayHoldCredentialBytes([]byte(js)) {
			if r, hit := RedactString(str); hit {
				t.Fatalf("RedactString(%q) = %q, but the filter over its JSON text %s passes over it", str, r, js)
			}
		}
		for _, text := range []string{js, `{"a":` + js + `,"b":[` + js + `]}`, `{` + js + `:1}`} {
			red, _ := RedactString(text)
			if _, err := ParseValue([]byte(red)); err != nil {
				t.Fatalf("RedactString(%s) = %s: not JSON: %v", text, red, err)
			}
		}
	})
}

// TestScrubbers checks that scrubbers apply after the patterns to every
// string and key, with their own reason, and to protected fields as the
// patterns do.
func TestScrubbers(t *testing.T) {
	t.Parallel()
	emails := ScrubPattern(regexp.MustCompile(`[\w.+-]+@[\w-]+(\.[\w-]+)+`))
	in := MustValueOf(map[string]any{"to": "dana@example.org", "dana@example.org": 1, "k": "sk-" + "abcdefghijklmnop dana@example.org", "n": 3})
	got, fs := RedactValue(in, emails)
	if strings.Contains(got.Canonical(), "dana@") {
		t.Fatalf("RedactValue = %s", got)
	}
	want := map[string]string{"/to": ReasonScrubber, "/[REDACTED]": ReasonScrubber, "/k": ReasonCredentialPattern}
	if len(fs) != len(want) {
		t.Errorf("findings %v, want %v", fs, want)
	}
	for _, f := range fs {
		if want[f.Path] != f.Reason {
			t.Errorf("finding %v, want reason %q", f, want[f.Path])
		}
	}
	if again, fs := RedactValue(got, emails); again != got || len(fs) != 0 {
		t.Errorf("scrubbing twice changed %s to %s (%v)", got, again, fs)
	}
	if s, hit := RedactString("mail dana@example.org", emails); !hit || s != "mail "+Redacted {
		t.Errorf("RedactString = %q, %v", s, hit)
	}
	ev := Event{ID: "evt_dana@example.org", RunID: "r", Type: ToolCall, Name: "t", Input: NullValue}
	if _, _, err := RedactEvent(ev, emails); !errors.Is(err, ErrProtectedField) {
		t.Errorf("RedactEvent with a scrubbed id = %v, want ErrProtectedField", err)
	}
	m := Manifest{RunID: "run_1", AgentName: "agent dana@example.org"}
	if red, es, err := RedactManifest(m, emails); err != nil || red.AgentName != "agent "+Redacted || len(es) != 1 || es[0].Reason != ReasonScrubber {
		t.Errorf("RedactManifest = %+v, %v, %v", red, es, err)
	}
}
