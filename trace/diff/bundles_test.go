package diff

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stepfork/stepfork/internal/pybundle"
	"github.com/stepfork/stepfork/trace"
)

// editedBundle saves tr and applies edits (old → new, each once) to its
// events.jsonl, leaving the recorded hashes and integrity.json as they are.
func editedBundle(t *testing.T, tr *trace.Trace, edits ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "run.sftrace")
	if err := tr.Clone().Save(p); err != nil {
		t.Fatal(err)
	}
	ep := filepath.Join(p, trace.EventsFile)
	data, err := os.ReadFile(ep)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(s, edits[i]) {
			t.Fatalf("%q is not in events.jsonl", edits[i])
		}
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	if err := os.WriteFile(ep, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBundlesEqualsRuns checks that Bundles gives what Runs gives for the
// loaded bundles (payloads of unchanged steps aside): on the vectors, on
// generated runs of Python stepfork's shape, and on bundles edited so that
// payloads differ where their recorded hashes say they are equal, differ
// only by what redaction or the behavior of an HTTP response leaves out,
// or are not in canonical form.
func TestBundlesEqualsRuns(t *testing.T) {
	t.Parallel()
	vec := func(name string) string { return filepath.Join(vectorDir, name) }
	gen := t.TempDir()
	genBase, genChanged := filepath.Join(gen, "base.sftrace"), filepath.Join(gen, "changed.sftrace")
	if err := pybundle.Write(genBase, 450, false); err != nil {
		t.Fatal(err)
	}
	if err := pybundle.Write(genChanged, 450, true); err != nil {
		t.Fatal(err)
	}
	b := trace.NewBuilder("agent")
	b.RunStart(map[string]any{"q": "Kathmandu"})
	b.LLM("openai", "gpt-test", map[string]any{"messages": []any{"hi"}}, map[string]any{"tool": "search",
		"usage": map[string]any{"prompt_tokens": 100, "prompt_tokens_details": map[string]any{"cached_tokens": 0}}})
	b.Tool("search", map[string]any{"to": "KTM"}, map[string]any{"price": 320.5, "note": "PLACEHOLDER"})
	b.Tool("http", map[string]any{"url": "https://example.com"}, map[string]any{"status": 200, "headers": map[string]any{"x-id": "a1"}, "body": "ok"})
	b.Tool("search", map[string]any{"to": "PKR"}, map[string]any{"price": 99})
	c := b.ToolCall("search", map[string]any{"to": "BKK"})
	b.ToolFailure(c, "Timeout", "no answer")
	b.State("cart", nil, map[string]any{"items": 2})
	b.RunEnd(trace.RunCompleted, map[string]any{"ok": true})
	run := b.MustTrace()
	plain := editedBundle(t, run)

	tests := []struct {
		name          string
		base, variant string
		equivalent    bool
	}{
		{"vectors/diff", vec("stepfork/diff_baseline.sftrace"), vec("stepfork/diff_changed.sftrace"), false},
		{"vectors/recorded", vec("stepfork-recorded/run_1000_calls.sftrace"), vec("stepfork-recorded/run_1000_calls.changed.sftrace"), false},
		{"vectors/recorded-reversed", vec("stepfork-recorded/run_1000_calls.changed.sftrace"), vec("stepfork-recorded/run_1000_calls.sftrace"), false},
		{"vectors/self", vec("stepfork-recorded/run_1000_calls.sftrace"), vec("stepfork-recorded/run_1000_calls.sftrace"), true},
		{"vectors/unrelated", vec("stepfork/successful_run.sftrace"), vec("stepfork/failed_tool_run.sftrace"), false},
		{"vectors/partial", vec("stepfork/partial_run.sftrace"), vec("stepfork/legacy_v01.sftrace"), false},
		{"generated", genBase, genChanged, false},
		{"generated/against-vector", genBase, vec("stepfork-recorded/run_1000_calls.sftrace"), false},
		{"lying-hash", plain, editedBundle(t, run, `"note":"PLACEHOLDER"`, `"note":"changed, hash kept"`), false},
		{"lying-hash/input", plain, editedBundle(t, run, `{"to":"PKR"}`, `{"to":"LIE"}`), false},
		{"redacted-difference", editedBundle(t, run, `"note":"PLACEHOLDER"`, `"api_key":"one","note":"PLACEHOLDER"`),
			editedBundle(t, run, `"note":"PLACEHOLDER"`, `"api_key":"two","note":"PLACEHOLDER"`), true},
		{"credential-difference", editedBundle(t, run, `"PLACEHOLDER"`, `"sk-aaaaaaaaaaaaaaaa"`),
			editedBundle(t, run, `"PLACEHOLDER"`, `"\u0073k-bbbbbbbbbbbbbbbb"`), true},
		{"http-headers", plain, editedBundle(t, run, `"x-id":"a1"`, `"x-id":"b2"`), true},
		{"not-canonical", plain, editedBundle(t, run, `{"note":"PLACEHOLDER","price":320.5}`, `{ "price" : 320.50, "note":"PLACEHOLDER" }`), true},
		{"usage", plain, editedBundle(t, run, `"cached_tokens":0`, `"cached_tokens":16`), true},
		{"usage/and-answer", plain, editedBundle(t, run, `"tool":"search","usage":{"prompt_tokens":100,"prompt_tokens_details":{"cached_tokens":0}}`, `"tool":"book","usage":{"prompt_tokens":100,"prompt_tokens_details":{"cached_tokens":16}}`), false},
		{"not-canonical/changed", plain, editedBundle(t, run, `{"note":"PLACEHOLDER","price":320.5}`, `{ "price" : 320.51, "note":"PLACEHOLDER" }`), false},
	}
	for _, tt := range tests {
		for _, mode := range []struct {
			name string
			opts []Option
		}{{"lcs", nil}, {"position", []Option{AlignPosition()}}, {"paths", []Option{DisplayPaths("a/./b", "c//d/")}}} {
			t.Run(tt.name+"/"+mode.name, func(t *testing.T) {
				t.Parallel()
				bt, err := trace.Load(tt.base)
				if err != nil {
					t.Fatal(err)
				}
				vt, err := trace.Load(tt.variant)
				if err != nil {
					t.Fatal(err)
				}
				want := Runs(bt, vt, mode.opts...)
				got, err := Bundles(tt.base, tt.variant, mode.opts...)
				if err != nil {
					t.Fatal(err)
				}
				// The positional mode is stepfork's, which compares a
				// model's usage.
				wantEq := tt.equivalent && !(tt.name == "usage" && mode.name == "position")
				if got.Equivalent() != wantEq || want.Equivalent() != wantEq {
					t.Errorf("Equivalent: Bundles %v, Runs %v, want %v", got.Equivalent(), want.Equivalent(), wantEq)
				}
				if w, g := string(want.JSON()), string(got.JSON()); w != g {
					t.Errorf("JSON differs:\nRuns:    %.600s\nBundles: %.600s", w, g)
				}
				if w, g := want.Explain(), got.Explain(); w != g {
					t.Errorf("Explain differs:\nRuns:\n%s\nBundles:\n%s", w, g)
				}
				if w, g := want.StepforkText(), got.StepforkText(); w != g {
					t.Errorf("StepforkText differs:\nRuns:\n%s\nBundles:\n%s", w, g)
				}
				// Field for field, but for the payloads of the steps that
				// are not changed, which Bundles does not read.
				unchangedPayload := cmp.FilterPath(func(p cmp.Path) bool {
					if p.Last().String() != ".Payload" {
						return false
					}
					for _, ps := range p {
						if s, ok := ps.(cmp.SliceIndex); ok {
							if vx, _ := s.Values(); vx.IsValid() && vx.Interface().(Step).Kind == Changed {
								return false
							}
						}
					}
					return true
				}, cmp.Ignore())
				if diff := cmp.Diff(want, got, unchangedPayload, cmpopts.EquateComparable(trace.Value{}),
					cmpopts.IgnoreFields(Divergence{}, "Base", "Variant")); diff != "" {
					t.Errorf("Result (-Runs +Bundles):\n%s", diff)
				}
			})
		}
	}
}

// TestBundlesErrors checks that Bundles reports what Load reports for an
// unreadable base or variant.
func TestBundlesErrors(t *testing.T) {
	t.Parallel()
	good := filepath.Join(vectorDir, "stepfork/successful_run.sftrace")
	b := trace.NewBuilder("agent")
	b.RunStart(nil)
	b.RunEnd(trace.RunCompleted, nil)
	broken := editedBundle(t, b.MustTrace(), `{"id"`, `{"id":1,"x"`)
	missing := filepath.Join(t.TempDir(), "missing.sftrace")
	for _, tt := range []struct{ base, variant, bad string }{
		{broken, good, broken}, {good, broken, broken}, {missing, broken, missing}, {good, missing, missing},
	} {
		_, want := trace.Load(tt.bad)
		d, err := Bundles(tt.base, tt.variant)
		if want == nil || err == nil || err.Error() != want.Error() || d != nil {
			t.Errorf("Bundles(%s, %s) = %v, %v; want the error of Load: %v", tt.base, tt.variant, d, err, want)
		}
	}
}
