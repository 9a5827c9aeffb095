package trace

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// copyRaw copies the bundle at src to dst through a BundleWriter under
// a new run id, as a fork does: lines in Save's form are copied with
// writeRaw, the others decoded in full and written with WriteEvent. It
// returns how many lines were copied raw.
func copyRaw(t *testing.T, src, dst, runID string, skip bool) int {
	t.Helper()
	opts := []OpenOption{checkSavedForm()}
	if skip {
		opts = append(opts, SkipPayloads())
	}
	r, err := Open(src, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := r.Manifest()
	m.RunID = runID
	w, err := NewBundleWriter(dst, m)
	if err != nil {
		t.Fatal(err)
	}
	w.SetRedactions(r.Redactions())
	raw := 0
	for ev, err := range r.Events() {
		if err != nil {
			w.Abort()
			t.Fatal(err)
		}
		if line, saved := r.rawLine(); saved {
			raw++
			ev.RunID = runID
			err = w.writeRaw(ev, line)
		} else {
			var full Event
			if err := r.Decode(&full); err != nil {
				t.Fatal(err)
			}
			full.RunID = runID
			err = w.WriteEvent(&full)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return raw
}

// saveWithRunID is what copyRaw must produce: Load, new run id, Save.
func saveWithRunID(t *testing.T, src, dst, runID string) {
	t.Helper()
	tr, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	tr.RunID = runID
	for i := range tr.Events {
		tr.Events[i].RunID = runID
	}
	tr.Extras = nil
	if err := tr.Save(dst); err != nil {
		t.Fatal(err)
	}
}

func sameFiles(t *testing.T, want, got string) {
	t.Helper()
	for _, name := range []string{ManifestFile, EventsFile, RedactionsFile, IntegrityFile} {
		w, err := os.ReadFile(filepath.Join(want, name))
		if err != nil {
			t.Fatal(err)
		}
		g, err := os.ReadFile(filepath.Join(got, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w, g) {
			t.Errorf("%s differs from Save's:\n%s", name, firstDiff(w, g))
		}
	}
}

// TestBundleWriterCopiesAsSave copies the shared Python-written bundles and
// Go-written ones line for line under a new run id, and checks that the
// result is byte for byte what Load and Save under that run id write, and
// that the lines of those bundles are copied raw (all of them, except
// events whose payloads hold what redaction looks for).
func TestBundleWriterCopiesAsSave(t *testing.T) {
	t.Parallel()
	srcs := vectorBundles(t)
	srcs = append(srcs, bundleOf(t, built(t, func(b *Builder) {
		b.RunStart(map[string]any{"task": "x", "eps": 0.00001, "big": 1e22, "tiny": 1.5e-7, "text": "काठमाडौँ \u2028 \"q\" \\ \t"})
		b.Tool("lookup", map[string]any{"api_key": "k-123456789", "q": 1}, []any{0.1, -0.0, 1e16})
		b.LLM("openai", "gpt", map[string]any{"messages": []any{"Authorization: Bearer abcdefgh12345"}}, "sk-abcdefghijkl")
		b.State("k", nil, map[string]any{"z": 1, "a": []any{}})
		b.RunEnd(RunCompleted, "done")
	})))
	for _, src := range srcs {
		t.Run(filepath.Base(src), func(t *testing.T) {
			t.Parallel()
			for _, skip := range []bool{false, true} {
				dir := t.TempDir()
				want, got := filepath.Join(dir, "want.sftrace"), filepath.Join(dir, "got.sftrace")
				saveWithRunID(t, src, want, "run_copy")
				raw := copyRaw(t, src, got, "run_copy", skip)
				sameFiles(t, want, got)
				tr, err := Load(src)
				if err != nil {
					t.Fatal(err)
				}
				clean := 0
				for i := range tr.Events {
					ev := &tr.Events[i]
					red, entries, _ := RedactEvent(*ev)
					if len(entries) == 0 && len(ev.Redactions) == 0 && !mayHoldCredentialBytes(appendEvent(nil, &red)) {
						clean++
					}
				}
				if raw < clean {
					t.Errorf("skip=%v: %d of %d events copied raw, but %d have nothing redaction looks for", skip, raw, len(tr.Events), clean)
				}
			}
		})
	}
}

// TestSavedFormRefuses edits one line of a Go-written bundle in ways that
// keep it a valid event with the same payloads, and checks that SavedForm
// then says the line is not what Save writes, while the untouched lines
// still are.
func TestSavedFormRefuses(t *testing.T) {
	t.Parallel()
	tr := built(t, func(b *Builder) {
		b.RunStart(map[string]any{"b": 0.00001, "a": "é/x"})
		b.Tool("lookup", map[string]any{"q": 1}, map[string]any{"n": 2})
		b.RunEnd(RunCompleted, nil)
	})
	tests := []struct {
		name string
		line int // 0-based
		edit func(string) string
	}{
		{"untouched", -1, nil},
		{"space after a colon", 0, replace(`"step":0`, `"step": 0`)},
		{"space inside a payload", 0, replace(`{"a":`, `{ "a":`)},
		{"payload keys out of order", 0, replace(`{"a":"é/x","b":0.00001}`, `{"b":0.00001,"a":"é/x"}`)},
		{"float in repr style", 0, replace(`0.00001`, `1e-05`)},
		{"escaped non-ASCII", 0, replace(`é`, `\u00e9`)},
		{"escaped slash", 0, replace(`/x`, `\/x`)},
		{"event keys out of order", 0, replace(`{"id":"evt_001","run_id":"run_agent"`, `{"run_id":"run_agent","id":"evt_001"`)},
		{"status left out", 1, replace(`"status":"ok",`, ``)},
		{"wrong payload hash", 1, func(s string) string {
			i := strings.Index(s, `"input_hash":"`) + len(`"input_hash":"`)
			c := byte('0')
			if s[i] == '0' {
				c = '1'
			}
			return s[:i] + string(c) + s[i+1:]
		}},
		{"hash where null belongs", 1, func(s string) string {
			i := strings.Index(s, `"input_hash":"`) + len(`"input_hash":`)
			return strings.Replace(s, `"output_hash":null`, `"output_hash":`+s[i:i+66], 1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := bundleOf(t, tr)
			if tt.edit != nil {
				editFile(t, p, EventsFile, editLine(tt.line, tt.edit))
			}
			r, err := Open(p, checkSavedForm())
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			i := 0
			for _, err := range r.Events() {
				if err != nil {
					t.Fatalf("the edited bundle does not load: %v", err)
				}
				if line, got := r.rawLine(); got != (i != tt.line) {
					t.Errorf("line %d: saved form = %v, want %v\n%s", i+1, got, i != tt.line, line)
				}
				i++
			}
		})
	}
}

// TestSavedFormRedaction: lines whose payloads hold a sensitive key or a
// credential-like text are never called saved form, even once redacted,
// so they always go through WriteEvent's redaction.
func TestSavedFormRedaction(t *testing.T) {
	t.Parallel()
	p := bundleOf(t, built(t, func(b *Builder) {
		b.RunStart(map[string]any{"nested": map[string]any{"Client-Secret": "s"}})
		b.Tool("lookup", map[string]any{"q": "Bearer abcdefgh12345"}, map[string]any{"max_tokens": 5})
		b.RunEnd(RunCompleted, nil)
	}))
	r, err := Open(p, checkSavedForm())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []bool
	for _, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		_, saved := r.rawLine()
		got = append(got, saved)
	}
	// run_start: sensitive key; tool_call: "Bearer"; tool_result: no
	// sensitive key (max_tokens is not one); run_end: clean.
	want := []bool{false, false, true, true}
	if !slicesEqual(got, want) {
		t.Errorf("SavedForm per event = %v, want %v", got, want)
	}
}

func slicesEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReaderSkipPayloads: with SkipPayloads the events come without
// payloads, and Decode gives each in full, as Load reads it.
func TestReaderSkipPayloads(t *testing.T) {
	t.Parallel()
	p := bundleOf(t, validTrace(t))
	tr, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(p, SkipPayloads())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out Event
	if err := r.Decode(&out); err == nil {
		t.Error("Decode before Events: no error")
	}
	i := 0
	for ev, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if !ev.Input.IsAbsent() || !ev.Output.IsAbsent() || ev.ID != tr.Events[i].ID || ev.InputHash != tr.Events[i].InputHash {
			t.Errorf("event %d with SkipPayloads: %+v", i, ev)
		}
		if err := r.Decode(&out); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tr.Events[i], out); diff != "" {
			t.Errorf("Decode of event %d differs from Load's (-want +got):\n%s", i, diff)
		}
		i++
	}
	if i != len(tr.Events) {
		t.Errorf("%d events, want %d", i, len(tr.Events))
	}
}

// TestBundleWriterRules: the overwrite rule is checked up front, Abort
// and refused input leave nothing behind, and a closed writer refuses
// more.
func TestBundleWriterRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	existing := bundleOf(t, validTrace(t))
	if _, err := NewBundleWriter(existing, Manifest{RunID: "run_x"}); !errors.Is(err, ErrStorage) || !errors.Is(err, fs.ErrExist) {
		t.Errorf("NewBundleWriter over a bundle without Overwrite: %v", err)
	}
	if _, err := NewBundleWriter(filepath.Join(dir, "x.trace"), Manifest{RunID: "run_x"}); err == nil || !strings.Contains(err.Error(), "must end with .sftrace") {
		t.Errorf("NewBundleWriter with a bad suffix: %v", err)
	}
	tr := validTrace(t)
	leftovers := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, ".*"))
		return m
	}

	p := filepath.Join(dir, "aborted.sftrace")
	w, err := NewBundleWriter(p, tr.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteEvent(&tr.Events[0]); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) || len(leftovers()) > 0 {
		t.Errorf("after Abort: stat %v, left %v", err, leftovers())
	}
	if err := w.WriteEvent(&tr.Events[1]); err == nil {
		t.Error("WriteEvent after Abort: no error")
	}

	p = filepath.Join(dir, "refused.sftrace")
	w, err = NewBundleWriter(p, tr.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.writeRaw(&tr.Events[0], []byte(`{"id":"other","run_id":"run_agent"}`)); err == nil || !strings.Contains(err.Error(), "does not start with the id of event evt_001") {
		t.Errorf("WriteRaw of another event's line: %v", err)
	}
	if err := w.Close(); err == nil {
		t.Error("Close after a refused line: no error")
	}
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) || len(leftovers()) > 0 {
		t.Errorf("after a refused line: stat %v, left %v", err, leftovers())
	}

	p = filepath.Join(dir, "ok.sftrace")
	w, err = NewBundleWriter(p, tr.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tr.Events {
		if err := w.WriteEvent(&tr.Events[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SetExtra("../x", nil); err == nil {
		t.Error("SetExtra with a path: no error")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Error("second Close: no error")
	}
	want := filepath.Join(dir, "want.sftrace")
	if err := tr.Save(want); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, want, p)
	if rep := ValidateBundle(context.Background(), p, CheckIntegrity()); !rep.Valid() {
		t.Errorf("written bundle is not valid: %v", rep.Issues)
	}
}
