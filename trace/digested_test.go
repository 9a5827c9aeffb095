package trace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// digestedBundles returns bundles for ReadBehavior: the shipped and vector
// bundles, and saved runs edited by hand so that redaction changes a
// payload (a sensitive key, a credential), an output is an HTTP response,
// a payload is not in canonical form, and a recorded hash lies.
func digestedBundles(t *testing.T) []string {
	t.Helper()
	paths := vectorBundles(t)
	shipped, err := filepath.Glob("../testdata/*.sftrace")
	if err != nil || len(shipped) == 0 {
		t.Fatalf("no shipped bundles: %v", err)
	}
	paths = append(paths, shipped...)
	run := built(t, func(b *Builder) {
		b.RunStart(map[string]any{"q": "Kathmandu"})
		b.LLM("openai", "gpt-test", map[string]any{"messages": []any{"hi"}}, map[string]any{"tool": "search"})
		b.Tool("search", map[string]any{"to": "KTM"}, map[string]any{"price": 320.5, "note": "PLACEHOLDER"})
		b.Tool("http", map[string]any{"url": "https://example.com"}, map[string]any{"status": 200, "headers": map[string]any{"x-id": "a1"}, "body": "ok"})
		c := b.ToolCall("search", map[string]any{"to": "PKR"})
		b.ToolFailure(c, "Timeout", "no answer")
		b.LLMRequest("openai", "gpt-test", map[string]any{"messages": []any{"unanswered"}})
		b.State("cart", nil, map[string]any{"items": 2})
		b.RunEnd(RunCompleted, map[string]any{"ok": true})
	})
	for _, edit := range []struct{ name, old, new string }{
		{"plain", "", ""},
		{"sensitive-key", `"note":"PLACEHOLDER"`, `"api_key":"abc","note":"PLACEHOLDER"`},
		{"credential", `"PLACEHOLDER"`, `"sk-abcdefghijklmnop"`},
		{"escaped-credential", `"PLACEHOLDER"`, `"\u0073k-abcdefghijklmnop"`},
		{"not-canonical", `{"note":"PLACEHOLDER","price":320.5}`, `{ "price" : 320.50, "note":"PLACEHOLDER" }`},
		{"lying-hash", `"PLACEHOLDER"`, `"changed, hash kept"`},
	} {
		p := bundleOf(t, run)
		if edit.old != "" {
			editFile(t, p, EventsFile, func(s string) string {
				if !strings.Contains(s, edit.old) {
					t.Fatalf("%s: %q is not in events.jsonl", edit.name, edit.old)
				}
				return strings.Replace(s, edit.old, edit.new, 1)
			})
		}
		paths = append(paths, p)
	}
	return paths
}

// TestReadBehavior checks that ReadBehavior gives the steps Behavior gives
// for the loaded bundle, payloads aside, with the digests of those steps,
// and that LoadPayloads then gives them whole.
func TestReadBehavior(t *testing.T) {
	t.Parallel()
	for _, p := range digestedBundles(t) {
		t.Run(filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p), func(t *testing.T) {
			t.Parallel()
			checkReadBehavior(t, p)
		})
	}
}

// checkReadBehavior checks ReadBehavior of the bundle at p against Load
// and Behavior: the same steps, payloads aside, with the digests of those
// steps, the same events (but for what is read as a digest) given to
// visit, and the whole steps after LoadPayloads. When Load fails,
// ReadBehavior must fail with the same error.
func checkReadBehavior(t *testing.T, p string) {
	t.Helper()
	tr, lerr := Load(p)
	if lerr != nil {
		_, err := ReadBehavior(p, nil)
		if err == nil || err.Error() != lerr.Error() {
			t.Fatalf("ReadBehavior: %v; want the error of Load: %v", err, lerr)
		}
		return
	}
	want := tr.Behavior()
	var visited []Event
	run, err := ReadBehavior(p, func(ev *Event) { visited = append(visited, *ev) })
	if err != nil {
		t.Fatal(err)
	}
	if len(visited) != len(tr.Events) {
		t.Fatalf("visited %d events, want %d", len(visited), len(tr.Events))
	}
	for i, got := range visited {
		w := tr.Events[i]
		if got.Input.IsAbsent() && got.Output.IsAbsent() && (!w.Input.IsAbsent() || !w.Output.IsAbsent()) {
			w.Input, w.Output, w.InputHash, w.OutputHash = Value{}, Value{}, "", "" // read as a digest
		}
		if diff := cmp.Diff(w, got, cmp.AllowUnexported(Value{})); diff != "" {
			t.Fatalf("event %d (-Load +visited):\n%s", i, diff)
		}
	}
	if len(run.Steps) != len(want) || len(run.Digests) != len(want) {
		t.Fatalf("%d steps and %d digests, want %d steps", len(run.Steps), len(run.Digests), len(want))
	}
	var all []int
	elided := 0
	for i := range want {
		if run.Steps[i].Payload.IsAbsent() {
			elided++
		}
		if run.Digests[i] != stepDigest(&want[i]) {
			t.Errorf("step %d (%s %s): digest differs from that of the loaded step", i, want[i].Type, want[i].Label)
		}
		got := run.Steps[i]
		if got.Payload.IsAbsent() {
			got.Payload = want[i].Payload
		}
		if diff := cmp.Diff(want[i], got, cmp.AllowUnexported(Value{})); diff != "" {
			t.Errorf("step %d (-Behavior +ReadBehavior):\n%s", i, diff)
		}
		all = append(all, i)
	}
	// Python's recorded run has 1,000 calls, none with anything
	// to redact: each is read as digests only.
	if strings.Contains(p, "run_1000_calls") && elided != 1000 {
		t.Errorf("%d steps read as digests, want 1000", elided)
	}
	if run.Manifest.RunID != tr.RunID || run.Path != p {
		t.Errorf("run %s at %s, want %s at %s", run.Manifest.RunID, run.Path, tr.RunID, p)
	}
	if err := run.LoadPayloads(all...); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, run.Steps, cmp.AllowUnexported(Value{})); diff != "" {
		t.Errorf("after LoadPayloads (-Behavior +ReadBehavior):\n%s", diff)
	}
}

// TestReadBehaviorDigestsDistinguish checks that steps whose payloads
// differ get different digests, and that a bundle edited after it was read
// makes LoadPayloads fail rather than give other payloads.
func TestReadBehaviorDigestsDistinguish(t *testing.T) {
	t.Parallel()
	tr := built(t, func(b *Builder) {
		b.RunStart(nil)
		b.Tool("search", map[string]any{"to": "KTM"}, map[string]any{"price": 1})
		b.Tool("search", map[string]any{"to": "KTM"}, map[string]any{"price": 1.0})
		b.Tool("search", map[string]any{"to": "KTM"}, map[string]any{"price": 1})
		b.Tool("search", map[string]any{"to": "PKR"}, map[string]any{"price": 1})
		b.Tool("other", map[string]any{"to": "KTM"}, map[string]any{"price": 1})
		b.RunEnd(RunCompleted, nil)
	})
	p := bundleOf(t, tr)
	run, err := ReadBehavior(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := run.Digests
	if d[0] == d[1] || d[0] != d[2] || d[0] == d[3] || d[0] == d[4] || d[3] == d[4] {
		t.Errorf("digests of steps 0-4: equal where payloads differ, or differ where they are equal")
	}
	editFile(t, p, EventsFile, replace(`"output":{"price":1}`, `"output":{"price":2}`))
	if err := run.LoadPayloads(0); err == nil || !strings.Contains(err.Error(), "changed while it was read") {
		t.Errorf("LoadPayloads after an edit: %v, want an error saying the file changed", err)
	}
}

// FuzzReadBehavior reads arbitrary bytes as the events.jsonl of a bundle
// with ReadBehavior and checks it against Load and Behavior
// (checkReadBehavior): it fails where Load fails, with the same error, and
// otherwise gives the same steps, each with the digest of its content. Its
// inputs are whole events files; fuzz it with a short minimization, as
// FuzzPacked:
//
//	go test ./trace -run '^$' -fuzz '^FuzzReadBehavior$' -fuzztime 5m -fuzzminimizetime 3s
func FuzzReadBehavior(f *testing.F) {
	for _, data := range vectorFiles(f, EventsFile) {
		if len(data) < 1<<16 {
			f.Add(data)
		}
	}
	src := filepath.Join(vectorDir, "stepfork", "successful_run.sftrace")
	lines, err := os.ReadFile(filepath.Join(src, EventsFile))
	if err != nil {
		f.Fatal(err)
	}
	for _, edit := range [][2]string{{`"output":{`, `"output":{"api_key":"x",`}, {`"output":{`, `"output":{"headers":{},"status":200,`},
		{`"input":{`, `"input":{"k":"sk-abcdefghijklmnop",`}, {`"input":{`, `"input":{ "z":1.50, "a":[ ],`}} {
		f.Add([]byte(strings.ReplaceAll(string(lines), edit[0], edit[1])))
	}
	manifest, err := os.ReadFile(filepath.Join(src, ManifestFile))
	if err != nil {
		f.Fatal(err)
	}
	redactions, err := os.ReadFile(filepath.Join(src, RedactionsFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "run.sftrace")
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{ManifestFile: manifest, RedactionsFile: redactions, EventsFile: data} {
			if err := os.WriteFile(filepath.Join(p, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		checkReadBehavior(t, p)
	})
}

// TestFuzzReadBehaviorSeedsLoad checks that the bundles FuzzReadBehavior
// builds load, so that its seeds test more than the errors.
func TestFuzzReadBehaviorSeedsLoad(t *testing.T) {
	t.Parallel()
	src := filepath.Join(vectorDir, "stepfork", "successful_run.sftrace")
	p := filepath.Join(t.TempDir(), "run.sftrace")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ManifestFile, RedactionsFile, EventsFile} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Load(p); err != nil {
		t.Fatalf("a bundle as FuzzReadBehavior builds it does not load: %v", err)
	}
}
