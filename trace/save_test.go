package trace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// emptyRedactions is redactions.json with no entries, byte for byte.
const emptyRedactions = "{\n  \"schema_version\": \"0.1\",\n  \"entries\": []\n}\n"

// smallTrace is a four-event run without secrets.
func smallTrace(t *testing.T) *Trace {
	t.Helper()
	b := NewBuilder("save-agent")
	b.RunStart(map[string]any{"city": "काठमाडौँ", "nested": map[string]any{"z": []any{1, 1.0, nil}, "a": false}})
	b.Tool("search", map[string]any{"to": "LIS"}, map[string]any{"price": 320.5})
	b.RunEnd(RunCompleted, map[string]any{"booked": true})
	return b.MustTrace()
}

// bundleBytes reads every file of a bundle, by name.
func bundleBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(data)
	}
	return out
}

// siblings returns the names in dir's parent other than dir itself: the
// temporary and backup directories Save must not leave behind.
func siblings(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.Name() != filepath.Base(dir) {
			out = append(out, e.Name())
		}
	}
	return out
}

func sha(data string) string {
	s := sha256.Sum256([]byte(data))
	return hex.EncodeToString(s[:])
}

func TestSaveWritesFourFiles(t *testing.T) {
	t.Parallel()
	tr := smallTrace(t)
	dst := filepath.Join(t.TempDir(), "four.sftrace")
	if err := tr.Save(dst); err != nil {
		t.Fatal(err)
	}
	files := bundleBytes(t, dst)
	if len(files) != 4 {
		t.Fatalf("files = %v, want the 4 bundle files", reflect.ValueOf(files).MapKeys())
	}
	if got := files[RedactionsFile]; got != emptyRedactions || sha(got) != "73ef2fd7072a70b1baa3b0230d94f0b87d9e9e9680275eaeda0eb66ff612293f" {
		t.Errorf("redactions.json = %q", got)
	}
	events := files[EventsFile]
	if !strings.HasSuffix(events, "\n") || strings.Count(events, "\n") != len(tr.Events) {
		t.Errorf("events.jsonl has %d lines, want one per event (%d)", strings.Count(events, "\n"), len(tr.Events))
	}
	if !strings.Contains(events, `"city":"काठमाडौँ"`) || !strings.Contains(events, `"nested":{"a":false,"z":[1,1.0,null]}`) {
		t.Errorf("payloads not written raw and sorted:\n%s", events)
	}
	wantIntegrity := "{\n  \"schema_version\": \"0.1\",\n  \"algorithm\": \"sha256\",\n  \"files\": {\n" +
		"    \"manifest.json\": \"" + sha(files[ManifestFile]) + "\",\n" +
		"    \"events.jsonl\": \"" + sha(events) + "\",\n" +
		"    \"redactions.json\": \"" + sha(emptyRedactions) + "\"\n  }\n}\n"
	if files[IntegrityFile] != wantIntegrity {
		t.Errorf("integrity.json =\n%s\nwant\n%s", files[IntegrityFile], wantIntegrity)
	}
	if tr.Path != dst {
		t.Errorf("Path = %q, want %q", tr.Path, dst)
	}
	back, err := Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Events[0].Input.Canonical(); got != `{"city":"काठमाडौँ","nested":{"a":false,"z":[1,1.0,null]}}` {
		t.Errorf("run_start input = %s", got)
	}
	if len(siblings(t, dst)) != 0 {
		t.Errorf("Save left %v beside the bundle", siblings(t, dst))
	}
}

func TestSaveEmptyTrace(t *testing.T) {
	t.Parallel()
	tr := &Trace{Manifest: Manifest{RunID: "run_empty", AgentName: "a", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	dst := filepath.Join(t.TempDir(), "empty.sftrace")
	if err := tr.Save(dst); err != nil {
		t.Fatal(err)
	}
	files := bundleBytes(t, dst)
	if files[EventsFile] != "" || sha(files[EventsFile]) != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("events.jsonl = %q, want 0 bytes", files[EventsFile])
	}
	if !strings.Contains(files[ManifestFile], `"status": "running"`) || !strings.Contains(files[ManifestFile], `"events": 0`) {
		t.Errorf("manifest.json:\n%s", files[ManifestFile])
	}
	back, err := Load(dst)
	if err != nil || len(back.Events) != 0 {
		t.Errorf("Load: %v, %d events", err, len(back.Events))
	}
}

func TestSaveDestinationRules(t *testing.T) {
	t.Parallel()
	t.Run("re-save needs Overwrite", func(t *testing.T) {
		t.Parallel()
		tr := smallTrace(t)
		dst := filepath.Join(t.TempDir(), "again.sftrace")
		if err := tr.Save(dst); err != nil {
			t.Fatal(err)
		}
		before := bundleBytes(t, dst)
		err := tr.Save(dst)
		if err == nil || !strings.Contains(err.Error(), dst+" already exists and is not empty") || !errors.Is(err, ErrStorage) || !errors.Is(err, os.ErrExist) {
			t.Errorf("second Save error = %v", err)
		}
		if !reflect.DeepEqual(bundleBytes(t, dst), before) {
			t.Error("refused Save changed the bundle")
		}
		tr.Events[0].Input = MustValueOf(map[string]any{"city": "Pokhara"})
		if err := tr.Save(dst, Overwrite()); err != nil {
			t.Fatal(err)
		}
		back, err := Load(dst)
		if err != nil || back.Events[0].Input.Get("city") != StringValue("Pokhara") {
			t.Errorf("overwritten bundle: %v, %v", err, back.Events[0].Input)
		}
		if s := siblings(t, dst); len(s) != 0 {
			t.Errorf("overwrite left %v beside the bundle", s)
		}
	})
	t.Run("Overwrite refuses an unrelated directory", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "photos.sftrace")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		writeBundleFile(t, dst, "holiday.jpg", "not a trace")
		writeBundleFile(t, dst, ManifestFile, "{}") // two of the three files missing
		err := smallTrace(t).Save(dst, Overwrite())
		if err == nil || !strings.Contains(err.Error(), dst+" is not a valid .sftrace bundle") {
			t.Errorf("Save error = %v", err)
		}
		want := map[string]string{"holiday.jpg": "not a trace", ManifestFile: "{}"}
		if got := bundleBytes(t, dst); !reflect.DeepEqual(got, want) {
			t.Errorf("the directory changed: %v", got)
		}
		if s := siblings(t, dst); len(s) != 0 {
			t.Errorf("refused Save left %v", s)
		}
	})
	t.Run("empty directory is replaced", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "empty.sftrace")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := smallTrace(t).Save(dst); err != nil {
			t.Fatalf("Save into an empty directory: %v", err)
		}
		if len(bundleBytes(t, dst)) != 4 {
			t.Error("bundle not written")
		}
		if s := siblings(t, dst); len(s) != 0 {
			t.Errorf("Save left %v", s)
		}
	})
	t.Run("file at the destination", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "file.sftrace")
		writeBundleFile(t, filepath.Dir(dst), filepath.Base(dst), "keep me")
		for _, opts := range [][]SaveOption{nil, {Overwrite()}} {
			err := smallTrace(t).Save(dst, opts...)
			if err == nil || err.Error() != dst+" exists and is not a directory" {
				t.Errorf("Save error = %v", err)
			}
		}
		if data, _ := os.ReadFile(dst); string(data) != "keep me" {
			t.Errorf("file changed to %q", data)
		}
	})
	t.Run("wrong suffix", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "run.trace")
		err := smallTrace(t).Save(dst)
		if err == nil || !strings.Contains(err.Error(), ".sftrace") || !errors.Is(err, ErrStorage) {
			t.Errorf("Save error = %v", err)
		}
		if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Save created %s", dst)
		}
	})
	t.Run("missing parent directories are created", func(t *testing.T) {
		t.Parallel()
		dst := filepath.Join(t.TempDir(), "a", "b", "deep.sftrace")
		if err := smallTrace(t).Save(dst); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(dst); err != nil {
			t.Error(err)
		}
	})
}

// TestSaveFailureKeepsOldBundle injects failures before and in the middle of
// writing and checks that the previous bundle survives byte for byte, with
// nothing left beside it.
func TestSaveFailureKeepsOldBundle(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(tr *Trace)
		want string
	}{
		{"event that fails checks", func(tr *Trace) { tr.Events[1].Name = "" }, "tool_call requires a non-empty name"},
		{"invalid manifest", func(tr *Trace) { tr.AgentName = "" }, "agent_name must be a non-empty string"},
		{"failure without failed status", func(tr *Trace) { tr.Failure = &Failure{Type: "E", Message: "m"} }, "failure must be omitted unless status is failed"},
		{"extra named like a core file", func(tr *Trace) { tr.Extras = map[string][]byte{IntegrityFile: nil} }, `extra bundle file name "integrity.json" is not allowed`},
		{"extra with a path", func(tr *Trace) { tr.Extras = map[string][]byte{"../evil.json": nil} }, "is not allowed"},
		// This name passes the checks and fails only when the file is
		// created, after manifest, events and redactions are written.
		{"extra the file system refuses", func(tr *Trace) { tr.Extras = map[string][]byte{strings.Repeat("x", 300) + ".json": []byte("{}")} }, "writing xxx"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dst := filepath.Join(t.TempDir(), "keep.sftrace")
			if err := smallTrace(t).Save(dst); err != nil {
				t.Fatal(err)
			}
			before := bundleBytes(t, dst)
			tr := smallTrace(t)
			tc.edit(tr)
			err := tr.Save(dst, Overwrite())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrStorage) {
				t.Fatalf("Save error = %v; want %q", err, tc.want)
			}
			if !reflect.DeepEqual(bundleBytes(t, dst), before) {
				t.Error("failed Save changed the old bundle")
			}
			if s := siblings(t, dst); len(s) != 0 {
				t.Errorf("failed Save left %v beside the bundle", s)
			}
			if tr.Path != "" {
				t.Errorf("failed Save set Path to %q", tr.Path)
			}
		})
	}
}

// TestSaveReplacesHashesKeepsStructure checks that Save computes every
// payload hash itself and keeps ids, steps and parents as given.
func TestSaveReplacesHashesKeepsStructure(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 10, 9, 11, 17, 33, 6570000, time.UTC)
	tr := &Trace{Manifest: Manifest{RunID: "run_s", AgentName: "a", CreatedAt: at, Status: RunCompleted}}
	add := func(ev Event) {
		ev.RunID, ev.Timestamp, ev.Status, ev.ReplayPolicy = "run_s", at, StatusOK, PolicyFrozen
		tr.Events = append(tr.Events, ev)
	}
	add(Event{ID: "evt_success_001", Step: 0, Type: RunStart, InputHash: "input123"})
	add(Event{ID: "b", ParentID: "evt_success_001", Step: 10, Type: ToolCall, Name: "t", Input: MustParse(`{"x":1e-5}`), OutputHash: "bogus"})
	add(Event{ID: "c", ParentID: "b", Step: 11, Type: ToolResult, Name: "t", Output: MustParse(`[1.5e-7]`)})
	add(Event{ID: "d", ParentID: "b", Step: 11, Type: StateChange, Key: "k", After: MustParse(`"v"`)})
	add(Event{ID: "e", Step: 12, Type: RunEnd, RunStatus: RunCompleted})
	orig := tr.Clone()
	dst := filepath.Join(t.TempDir(), "hashes.sftrace")
	if err := tr.Save(dst); err != nil {
		t.Fatal(err)
	}
	tr.Path = ""
	if !reflect.DeepEqual(tr, orig) {
		t.Errorf("Save changed the caller's trace:\n%+v\n%+v", tr.Events, orig.Events)
	}
	back, err := Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	nullHash := "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"
	want := []struct {
		id, parent string
		step       int
		in, out    string
	}{
		{"evt_success_001", "", 0, nullHash, ""}, // absent input is written as null, and hashed
		{"b", "evt_success_001", 10, Hash(MustParse(`{"x":1e-05}`)), ""},
		{"c", "b", 11, "", Hash(MustParse(`[1.5e-07]`))},
		{"d", "b", 11, nullHash, Hash(StringValue("v"))},
		{"e", "", 12, "", nullHash},
	}
	for i, w := range want {
		ev := back.Events[i]
		if ev.ID != w.id || ev.ParentID != w.parent || ev.Step != w.step || ev.InputHash != w.in || ev.OutputHash != w.out {
			t.Errorf("event %d = {%s %s %d %q %q}, want %+v", i, ev.ID, ev.ParentID, ev.Step, ev.InputHash, ev.OutputHash, w)
		}
	}
	if !back.Events[1].Timestamp.Equal(at) || !strings.Contains(bundleBytes(t, dst)[EventsFile], `"timestamp":"2026-10-09T11:17:33.006570Z"`) {
		t.Errorf("timestamp = %v", back.Events[1].Timestamp)
	}
	if !strings.Contains(bundleBytes(t, dst)[EventsFile], `"input":{"x":0.00001}`) {
		t.Error("floats not written the Pydantic way in events.jsonl")
	}
}

func TestSaveManifestRoundTrip(t *testing.T) {
	t.Parallel()
	tr := smallTrace(t)
	py, osName := "3.13", "linux"
	cost, dur := 0.25, int64(123)
	tr.Status = RunFailed
	tr.Failure = &Failure{Type: "ValueError", Message: "bad input", Step: 2}
	tr.Environment = Environment{Python: &py, OS: &osName}
	tr.Totals = Totals{Events: 99, LLMCalls: 7, CostUSD: &cost, DurationMS: &dur}
	dst := filepath.Join(t.TempDir(), "meta.sftrace")
	if err := tr.Save(dst); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	wantTotals := Totals{Events: 4, LLMCalls: 0, ToolCalls: 1, CostUSD: &cost, DurationMS: &dur}
	if back.Status != RunFailed || !reflect.DeepEqual(back.Failure, tr.Failure) || !reflect.DeepEqual(back.Environment, tr.Environment) ||
		!reflect.DeepEqual(back.Totals, wantTotals) || !back.CreatedAt.Equal(tr.CreatedAt) || back.AgentName != "save-agent" {
		t.Errorf("manifest after round trip = %+v", back.Manifest)
	}
	if tr.Totals.Events != 99 {
		t.Error("Save changed the caller's totals")
	}
}

func TestSaveExtras(t *testing.T) {
	t.Parallel()
	tr := smallTrace(t)
	fork := []byte("{\n  \"parent_run_id\": \"run_x\"\n}\n")
	tr.Extras = map[string][]byte{"fork.json": fork, "notes.txt": []byte("sk-abcdefghijkl is not redacted here")}
	dst := filepath.Join(t.TempDir(), "extras.sftrace")
	if err := tr.Save(dst); err != nil {
		t.Fatal(err)
	}
	files := bundleBytes(t, dst)
	if len(files) != 6 {
		t.Errorf("bundle has %d files, want 6", len(files))
	}
	integ := files[IntegrityFile]
	wantTail := "    \"redactions.json\": \"" + sha(emptyRedactions) + "\",\n" +
		"    \"fork.json\": \"" + sha(string(fork)) + "\",\n" +
		"    \"notes.txt\": \"" + sha(files["notes.txt"]) + "\"\n  }\n}\n"
	if !strings.HasSuffix(integ, wantTail) {
		t.Errorf("integrity.json =\n%s\nwant it to end with\n%s", integ, wantTail)
	}
	if res := VerifyIntegrity(dst); res.Status != IntegrityVerified || !reflect.DeepEqual(res.VerifiedFiles, []string{ManifestFile, EventsFile, RedactionsFile, "fork.json", "notes.txt"}) {
		t.Errorf("VerifyIntegrity = %+v", res)
	}
	back, err := Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Extras, tr.Extras) {
		t.Errorf("Extras after Load = %q, want %q", back.Extras, tr.Extras)
	}
	// A file beside the bundle files that integrity.json does not list is
	// ignored, as Python ignores it.
	writeBundleFile(t, dst, "stray.txt", "x")
	if back, err := Load(dst); err != nil || len(back.Extras) != 2 {
		t.Errorf("Load with a stray file: %v, extras %v", err, back.Extras)
	}
	// Editing an extra is an integrity mismatch naming it.
	writeBundleFile(t, dst, "fork.json", "{}")
	if res := VerifyIntegrity(dst); res.Status != IntegrityMismatch || len(res.Issues) != 1 || res.Issues[0].File != "fork.json" {
		t.Errorf("VerifyIntegrity after editing fork.json = %+v", res)
	}
	// Load then Save reproduces the bundle.
	back.Extras["fork.json"] = fork
	again := filepath.Join(t.TempDir(), "extras.sftrace")
	if err := back.Save(again); err != nil {
		t.Fatal(err)
	}
	got := bundleBytes(t, again)
	delete(files, "stray.txt")
	if !reflect.DeepEqual(got, files) {
		t.Errorf("re-saved bundle differs")
	}
}

// TestSaveOverwriteReplacesExtras checks that an overwrite replaces the whole
// bundle, extra files included.
func TestSaveOverwriteReplacesExtras(t *testing.T) {
	t.Parallel()
	tr := smallTrace(t)
	tr.Extras = map[string][]byte{"fork.json": []byte("{}")}
	dst := filepath.Join(t.TempDir(), "over.sftrace")
	if err := tr.Save(dst); err != nil {
		t.Fatal(err)
	}
	tr.Extras = nil
	if err := tr.Save(dst, Overwrite()); err != nil {
		t.Fatal(err)
	}
	files := bundleBytes(t, dst)
	if _, ok := files["fork.json"]; ok || len(files) != 4 {
		t.Errorf("files after overwrite: %d, fork.json kept: %v", len(files), ok)
	}
	if !bytes.Contains([]byte(files[IntegrityFile]), []byte(EventsFile)) || strings.Contains(files[IntegrityFile], "fork.json") {
		t.Errorf("integrity.json:\n%s", files[IntegrityFile])
	}
}
