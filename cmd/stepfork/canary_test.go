package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/internal/corpus"
	"github.com/stepfork/stepfork/trace"
)

// canary is a made-up credential of one kind and the part of it that must
// never be printed or written (needle: the secret after its well-known
// prefix, so that even a cut-off copy of more than a few characters is
// found).
type canary struct {
	kind, secret, needle string
}

// canaries are made up of every kind the credential patterns catch, put
// together at run time so that this file holds none. Each must stay on one
// line and hold no space-free break a JSON id could not hold.
func canaries() []canary {
	return []canary{
		{"openai key", "sk-" + "proj-Zx81kQmW2vLp9TnB4cYd", "Zx81kQmW2vLp"},
		{"github pat classic", "ghp_" + "R2d2C3poBb8Ewok5Yoda9Luke", "R2d2C3poBb8E"},
		{"github oauth", "gho_" + "Q7wErTyUiOp4AsDfGhJkL", "Q7wErTyUiOp4"},
		{"github fine-grained", "github_pat_" + "11ABCDEFG0abcdefghij_KLMNOPQ", "11ABCDEFG0ab"},
		{"bearer", "Bearer " + "dG9rZW4tc2VjcmV0LTk5OQ", "dG9rZW4tc2Vj"},
		{"authorization header", "Authorization: Bearer " + "YXV0aC1zZWNyZXQtNDI0Mg", "YXV0aC1zZWNy"},
		{"aws access key", "AKIA" + "QYLPMN5HHHFPZAM2", "QYLPMN5HHHFP"},
		{"aws temporary key", "ASIA" + "Y34FZKBOKMUTVV7A", "Y34FZKBOKMUT"},
		{"google api key", "AIza" + "SyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI", "SyDdI0hCZtE6"},
		{"slack bot token", "xoxb-" + "17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy", "17653672481-1987"},
		{"slack app token", "xapp-" + "1-A0123456789-1234567890123-abcdef0123456789", "1-A0123456789"},
		{"slack webhook", "https://hooks.slack.com/" + "services/T0A1B2C3D4E/B0A1B2C3D4E/abcdefghijklmnopqrstuvwx", "T0A1B2C3D4E/B0A1"},
		{"stripe secret key", "sk_" + "live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWD"},
		{"stripe restricted key", "rk_" + "live_51H8uGbCnS2dX9jQm0aZ3PqL", "51H8uGbCnS2d"},
		{"jwt", "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "hbGciOiJIUzI1"},
		{"pem private key", "-----BEGIN " + "PRIVATE KEY-----MIIEvQIBADANBgkqhkiG9w0BAQEFAASC-----END PRIVATE KEY-----", "MIIEvQIBADAN"},
		{"github server token", "ghs_" + "16C7e42F292c6912E7710c838347Ae178B4a", "16C7e42F292c"},
		{"gitlab token", "glpat-" + "xVzB7ZK1sYjqJ8tRfM2n", "xVzB7ZK1sYjq"},
		{"npm token", "npm_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3d", "Ab3dEf6hIj9k"},
		{"hugging face token", "hf_" + "QzWxEcRvTbYnUmIkOlPaSdFgHjKlZxCvBn", "QzWxEcRvTbYn"},
		{"http basic", "Authorization: Basic " + "dXNlcjpodW50ZXIyc2VjcmV0", "dXNlcjpodW50"},
		{"url userinfo", "see https://bob:" + "Hunter2Secretpw@example.com/x", "Hunter2Secretpw"},
		{"database dsn", "postgres://app:" + "Pg5ecretPassw0rd@db.internal:5432/prod", "Pg5ecretPassw0rd"},
		{"api_key in text", "api_key=" + "k3yV4lu3S3cr3tXyz", "k3yV4lu3S3cr3t"},
		{"access_token in text", "access_token=" + "t0k3nV4lu3S3cr3tQ", "t0k3nV4lu3S3cr3t"},
		{"aws secret key", "AKIAQYLPMN5HHHFPZAM2 " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"},
		{"azure account key", "AccountKey=" + "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==", "Eby8vdM02xNO"},
	}
}

// placeholder stands for the canary while the bundle is built with the
// library (whose Save would redact or refuse the canary); it is then
// replaced on disk, and the hashes and digests fixed up.
const placeholder = "QQPLACEHOLDERQQ"

// canaryRun records a failed run that carries the placeholder in every
// place a string can be: ids, run id, agent name, tool names, model,
// provider, state key, error types and messages, the failure, payloads,
// object keys; glued to the word characters before it (run_…, x_…, 9…)
// and after a line break that JSON output escapes as \n (a last pass over
// output saw "\nghp_…" as one word). variant changes a result and adds a
// call, for diffs.
func canaryRun(variant bool) *trace.Trace {
	p := placeholder
	b := trace.NewBuilder("a\n" + p).RunID("run_" + p).IDs(func(n int) string { return fmt.Sprintf("evt-%s-%d", p, n) })
	start := b.RunStart(map[string]any{"ask": "refund " + p, "user": p, p: "as a key", "k_" + p: "glued key"})
	b.LLM("prov-"+p, "model-"+p, map[string]any{"prompt": "use " + p}, map[string]any{"content": "call tool-" + p})
	b.Tool("tool-"+p, map[string]any{"q": p, "glued": "x_" + p, "digit": "9" + p, "escaped": "line\n" + p}, map[string]any{"result": "found " + p})
	out := "ok " + p
	if variant {
		out = "changed " + p
		b.Tool("extra-"+p, map[string]any{"q": p + " again"}, map[string]any{"r": p})
	}
	b.State("key-"+p, map[string]any{"v": p}, map[string]any{"v": out})
	call := b.ToolCall("pay-"+p, map[string]any{"card": p})
	b.ToolFailure(call, "Err-"+p, "declined: "+p)
	b.Tool("lookup_"+p, map[string]any{p: map[string]any{"nested " + p: p}}, map[string]any{"z" + p: "value"})
	b.Error(start, "Fail-"+p, "run failed: "+p, map[string]any{"why": p})
	b.Fail("Fail-"+p, "run failed: "+p)
	return b.MustTrace()
}

// writeCanaryBundle saves tr at path, puts secret wherever tr holds the
// placeholder, and makes the bundle valid again: payload hashes and
// integrity.json recomputed.
func writeCanaryBundle(t *testing.T, tr *trace.Trace, path, secret string) {
	t.Helper()
	if err := tr.Save(path); err != nil {
		t.Fatal(err)
	}
	esc, _ := json.Marshal(secret)
	repl := string(esc[1 : len(esc)-1])
	for _, name := range []string{trace.ManifestFile, trace.EventsFile} {
		p := filepath.Join(path, name)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(data), placeholder, repl)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	loaded, err := trace.Load(path)
	if err != nil {
		t.Fatalf("the canary bundle does not load: %v", err)
	}
	events := filepath.Join(path, trace.EventsFile)
	data, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, ev := range loaded.Events {
		in, out := ev.ExpectedHashes()
		if ev.InputHash != "" && in != ev.InputHash {
			text = strings.Replace(text, ev.InputHash, in, 1)
		}
		if ev.OutputHash != "" && out != ev.OutputHash {
			text = strings.Replace(text, ev.OutputHash, out, 1)
		}
	}
	if err := os.WriteFile(events, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("{\n  \"schema_version\": \"0.1\",\n  \"algorithm\": \"sha256\",\n  \"files\": {")
	for i, name := range []string{trace.ManifestFile, trace.EventsFile, trace.RedactionsFile} {
		data, err := os.ReadFile(filepath.Join(path, name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n    %q: %q", name, hex.EncodeToString(sum[:]))
	}
	b.WriteString("\n  }\n}\n")
	if err := os.WriteFile(filepath.Join(path, trace.IntegrityFile), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCanariesNeverPrinted feeds bundles that carry a canary of every
// credential pattern in their ids, names, error types, messages, agent name
// and payloads through every command and output format of the built
// binary, valid and invalid, and finds none of them in stdout, stderr or
// any file the commands write.
func TestCanariesNeverPrinted(t *testing.T) {
	t.Parallel()
	for _, c := range canaries() {
		t.Run(c.kind, func(t *testing.T) {
			t.Parallel()
			if got, hit := trace.RedactString(c.secret); !hit || strings.Contains(got, c.needle) {
				t.Fatalf("the pattern does not catch the canary %q: %q", c.secret, got)
			}
			dir := t.TempDir()
			writeCanaryBundle(t, canaryRun(false), filepath.Join(dir, "base.sftrace"), c.secret)
			writeCanaryBundle(t, canaryRun(true), filepath.Join(dir, "variant.sftrace"), c.secret)
			if r := stepfork(t, dir, nil, "validate", "base.sftrace", "--verify-integrity"); r.code != 0 {
				t.Fatalf("the canary bundle does not validate (exit %d):\n%s", r.code, r.stdout)
			}
			// An invalid bundle: an event id appears twice.
			writeCanaryBundle(t, canaryRun(false), filepath.Join(dir, "dup.sftrace"), c.secret)
			dup := filepath.Join(dir, "dup.sftrace", trace.EventsFile)
			data, err := os.ReadFile(dup)
			if err != nil {
				t.Fatal(err)
			}
			esc, _ := json.Marshal(c.secret)
			id := func(n int) string { return `"evt-` + string(esc[1:len(esc)-1]) + fmt.Sprintf(`-%d"`, n) }
			data = []byte(strings.Replace(string(data), `"id":`+id(3), `"id":`+id(2), 1))
			if err := os.WriteFile(dup, data, 0o644); err != nil {
				t.Fatal(err)
			}
			firstID := "evt-" + c.secret + "-1"
			runs := [][]string{
				{"validate", "base.sftrace"},
				{"validate", "base.sftrace", "--json"},
				{"validate", "base.sftrace", "--verify-integrity", "--pedantic", "--json"},
				{"validate", "dup.sftrace"},
				{"validate", "dup.sftrace", "--json"},
				{"validate", "dup.sftrace", "--partial", "--verify-integrity", "--json"},
				{"inspect", "base.sftrace"},
				{"inspect", "base.sftrace", "--json"},
				{"inspect", "base.sftrace", "--events"},
				{"inspect", "base.sftrace", "--errors-only", "--json"},
				{"inspect", "base.sftrace", "--step", "3", "--json"},
				{"inspect", "base.sftrace", "--step", "99"},
				{"inspect", "dup.sftrace", "--json"},
				{"points", "base.sftrace"},
				{"points", "base.sftrace", "--json"},
				{"diff", "base.sftrace", "variant.sftrace"},
				{"diff", "base.sftrace", "variant.sftrace", "--json"},
				{"diff", "base.sftrace", "variant.sftrace", "--align", "position"},
				{"diff", "base.sftrace", "variant.sftrace", "--align", "position", "--json"},
				{"diff", "dup.sftrace", "variant.sftrace", "--json"},
				{"minimize", "base.sftrace", "-o", "min1.sftrace"},
				{"minimize", "base.sftrace", "-o", "min2.sftrace", "--json"},
				{"export", "base.sftrace", "--otlp"},
				{"export", "base.sftrace", "--otlp", "--content"},
				{"export", "base.sftrace", "--otlp", "--content", "-o", "spans.jsonl", "--json"},
				{"export", "base.sftrace", "--go-test", "--agent", "Run", "--package", "p", "-o", "gen_test.go"},
				{"export", "dup.sftrace", "--otlp"},
				{"export", "dup.sftrace", "--otlp", "--json"},
				{"fork", "base.sftrace", "--at-step", "3", "-o", "f1.sftrace"},
				{"fork", "base.sftrace", "--at-step", "3", "-o", "f2.sftrace", "--json"},
				{"fork", "base.sftrace", "--at-event", firstID, "-o", "f3.sftrace"},
				{"fork", "base.sftrace", "--at-step", "4", "--override", `4={"v":"` + string(esc[1:len(esc)-1]) + `"}`, "-o", "f4.sftrace", "--json"},
				{"fork", "dup.sftrace", "--at-step", "1", "-o", "f5.sftrace"},
				{"view", "base.sftrace", "--html", "page.html"},
				{"view", "dup.sftrace", "--html", "dup.html"},
			}
			for _, args := range runs {
				r := stepfork(t, dir, nil, args...)
				for name, out := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
					if i := strings.Index(out, c.needle); i >= 0 {
						t.Errorf("stepfork %s (exit %d): the %s canary is in %s: …%s…", strings.Join(args, " "), r.code, c.kind, name, out[max(0, i-80):min(len(out), i+40)])
					}
				}
				if args[0] == "export" && strings.HasPrefix(args[1], "dup") && r.code != exitInput {
					t.Errorf("stepfork %s: exit %d on an invalid bundle, want %d", strings.Join(args, " "), r.code, exitInput)
				}
			}
			inputs := map[string]bool{"base.sftrace": true, "variant.sftrace": true, "dup.sftrace": true}
			err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				if inputs[strings.Split(rel, string(filepath.Separator))[0]] || d.IsDir() {
					return nil
				}
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if i := strings.Index(string(data), c.needle); i >= 0 {
					t.Errorf("the %s canary is in the written file %s: …%s…", c.kind, rel, data[max(0, i-80):min(len(data), i+40)])
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCanariesNeverReported gives stepfork report results whose every
// string (corpus and entry names, divergence, tail, statuses, paths, build
// fields) carries a canary of every kind, raw, glued to a word and after an
// escaped line break, and finds none in its text, JSON or page.
func TestCanariesNeverReported(t *testing.T) {
	t.Parallel()
	for _, c := range canaries() {
		t.Run(c.kind, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := c.secret
			var b strings.Builder
			enc := func(r corpus.Record) {
				if err := corpus.Encode(&b, r); err != nil {
					t.Fatal(err)
				}
			}
			name := "TestCorpus_" + s
			enc(corpus.Record{Kind: "shard", Corpus: name, Index: 0, Total: 1, Matched: 2, Owned: 2,
				Module: "m_" + s, Version: "v" + s, Revision: "r" + s, RevisionTime: "t\n" + s})
			// Paths joined by hand: filepath.Join would fold the // of a
			// URL, which then is no credential's shape.
			for i, path := range []string{dir + "/x_" + s + ".sftrace", dir + "/9" + s + ".sftrace"} {
				enc(corpus.Record{Kind: "entry", Corpus: name, Name: fmt.Sprintf("entry%d_%s", i, s), Outcome: corpus.Diverged,
					Divergence: "tool 'lookup_" + s + "' input differs: a\n" + s, BaseStatus: "s_" + s, Status: "z" + s,
					Tail: "tail " + s, Path: path, Revision: "r" + s, RevisionTime: "t\n" + s, Module: "m_" + s, Version: "v" + s})
				enc(corpus.Record{Kind: "used", Path: path})
			}
			if err := os.WriteFile(filepath.Join(dir, "pkg.test.shard-0-of-1.jsonl"), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			page := filepath.Join(dir, "report.html")
			for _, args := range [][]string{
				{"report", dir},
				{"report", "--json", dir},
				{"report", dir, "--corpus", dir},
				{"report", dir, "--html", page},
			} {
				r := stepfork(t, "", nil, args...)
				if r.stdout+r.stderr == "" {
					t.Errorf("stepfork %s: exit %d and no output", strings.Join(args, " "), r.code)
				}
				if args[1] == dir && len(args) == 2 {
					// One line per entry: a divergence quoting a line
					// break cannot start a line of its own.
					if n := strings.Count(r.stdout, "\n"); n != 4 {
						t.Errorf("stepfork %s: %d lines, want 4 (the corpus, its revisions and its 2 entries):\n%s", strings.Join(args, " "), n, r.stdout)
					}
				}
				for where, out := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
					if i := strings.Index(out, c.needle); i >= 0 {
						t.Errorf("stepfork %s: the %s canary is in %s: …%s…", strings.Join(args, " "), c.kind, where, out[max(0, i-80):min(len(out), i+40)])
					}
				}
			}
			html, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			// A revision is shown by its first 12 characters: the start of
			// the secret must not be there either.
			start := c.needle[:8]
			if i := strings.Index(string(html), start); i >= 0 {
				t.Errorf("the start of the %s canary is in the report page: …%s…", c.kind, html[max(0, i-80):min(len(html), i+40)])
			}
			if i := strings.Index(string(html), c.needle); i >= 0 {
				t.Errorf("the %s canary is in the report page: …%s…", c.kind, html[max(0, i-80):min(len(html), i+40)])
			}
		})
	}
}
