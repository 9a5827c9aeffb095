package fork

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stepfork/stepfork/trace"
)

// sameBundle fails unless the two bundles hold the same files, byte for
// byte.
func sameBundle(t *testing.T, want, got string) {
	t.Helper()
	for _, name := range []string{trace.ManifestFile, trace.EventsFile, trace.RedactionsFile, infoFile, trace.IntegrityFile} {
		w, err := os.ReadFile(filepath.Join(want, name))
		if err != nil {
			t.Fatal(err)
		}
		g, err := os.ReadFile(filepath.Join(got, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w, g) {
			t.Errorf("%s of the streamed fork differs from the in-memory fork's:\nwant %.600s\ngot  %.600s", name, w, g)
		}
	}
}

// handEdited is a Go-written bundle whose lines were then edited by hand
// without changing any event: spacing, key order, a float in repr style,
// an escaped character. It also holds what redaction looks for. Its lines
// cannot be copied raw, so a fork of it goes through the full path.
func handEdited(t *testing.T) string {
	t.Helper()
	b := trace.NewBuilder("edited").RunID("run_edit")
	b.RunStart(map[string]any{"task": "x", "eps": 0.00001})
	b.Tool("lookup", map[string]any{"client_secret": "abc", "q": "é"}, map[string]any{"hits": []any{1, 2}})
	b.LLM("openai", "gpt", map[string]any{"max_tokens": 5}, map[string]any{"text": "Bearer abcdefgh12345"})
	b.Tool("quote", map[string]any{"id": 7}, map[string]any{"value": 1.5e-7})
	b.RunEnd(trace.RunCompleted, "done")
	p := saveTemp(t, b.MustTrace(), "edited.sftrace")
	name := filepath.Join(p, trace.EventsFile)
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	lines[0] = strings.Replace(lines[0], `"step":0`, `"step": 0`, 1)
	lines[0] = strings.Replace(lines[0], `0.00001`, `1e-05`, 1)
	lines[2] = strings.Replace(lines[2], `{"hits":[1,2]}`, `{ "hits" : [1, 2] }`, 1)
	lines[1] = strings.Replace(lines[1], `"q":"é"`, `"q":"\u00e9"`, 1)
	if err := os.WriteFile(name, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStreamedForkMatchesInMemory forks bundles through their path and
// checks that the saved fork is byte for byte the
// one a fork of the loaded trace saves, and that Result matches: on the
// shared Python-written bundles, a Go-written one, and a hand-edited one,
// at the first, a middle and the last step, with an override where the
// fork keeps an overridable event.
func TestStreamedForkMatchesInMemory(t *testing.T) {
	t.Parallel()
	srcs, err := filepath.Glob(filepath.Join(vectorDir, "*", "*.sftrace"))
	if err != nil || len(srcs) < 9 {
		t.Fatalf("found %d shared vectors (%v)", len(srcs), err)
	}
	srcs = append(srcs, saveTemp(t, tenSteps(t), "ten.sftrace"), handEdited(t))
	for _, src := range srcs {
		tr, err := trace.Load(src)
		if err != nil {
			t.Fatal(err)
		}
		last := tr.Events[len(tr.Events)-1].Step
		for _, at := range []int{0, last / 2, last} {
			var overrides []TraceOption
			for i := range tr.Events {
				if ev := &tr.Events[i]; ev.Step <= at && (ev.Type == trace.ToolResult || ev.Type == trace.LLMResponse) {
					overrides = []TraceOption{Override(OnEvent(ev.ID), map[string]any{"overridden": true, "eps": 0.00001})}
					break
				}
			}
			t.Run(fmt.Sprintf("%s/step=%d", filepath.Base(src), at), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				opts := func(out string) []TraceOption {
					return testOpts{Overrides: overrides, OutputPath: filepath.Join(dir, out), RunID: "run_forked", Now: fixedNow}.list()
				}
				want, err := Trace(tr, ThroughStep(at), opts("mem.sftrace")...)
				if err != nil {
					t.Fatal(err)
				}
				got, err := Trace(src, ThroughStep(at), opts("path.sftrace")...)
				if err != nil {
					t.Fatal(err)
				}
				sameBundle(t, want.Path, got.Path)
				if got.Trace != nil {
					t.Error("a fork of a path holds its trace in memory")
				}
				want.Trace = nil
				ignore := cmpopts.IgnoreFields(Result{}, "Path")
				if diff := cmp.Diff(want, got, ignore, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("Result of the path fork differs (-in memory +path):\n%s", diff)
				}
				saved, err := trace.Load(got.Path)
				if err != nil {
					t.Fatal(err)
				}
				mem, _ := Trace(tr, ThroughStep(at), testOpts{Overrides: overrides, RunID: "run_forked", Now: fixedNow}.list()...)
				if diff := cmp.Diff(mem.Trace, saved, cmpopts.IgnoreFields(trace.Trace{}, "Path"), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("Result.Trace of the unsaved fork differs from the saved bundle (-in memory +saved):\n%s", diff)
				}
			})
		}
	}
}

// TestStreamedForkErrorsLeaveNothing: a fork of a path that fails after it
// has started writing (an override beyond the fork point, an unsaveable
// destination found only at the end) leaves no bundle and no temporary
// directory, and reports the same error as a fork in memory.
func TestStreamedForkErrorsLeaveNothing(t *testing.T) {
	t.Parallel()
	tr := tenSteps(t)
	src := saveTemp(t, tr, "ten.sftrace")
	dir := t.TempDir()
	out := filepath.Join(dir, "out.sftrace")
	opts := testOpts{Overrides: []TraceOption{Override(OnStep(7), "x")}, OutputPath: out}.list()
	_, memErr := Trace(tr, ThroughStep(3), opts...)
	_, err := Trace(src, ThroughStep(3), opts...)
	if err == nil || memErr == nil || err.Error() != memErr.Error() || !errors.Is(err, ErrInvalidChange) {
		t.Errorf("path fork error %v; in-memory fork error %v", err, memErr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the failed fork left %v", entries)
	}
}

// TestStreamedForkOfPackedReadsTheWholeArchive: a fork of the first steps
// of a packed bundle whose archive holds an entry after events.jsonl is
// refused as every reader refuses it (the rest of the archive is read,
// though no event of it is kept), and leaves nothing; the same fork of a
// sound packed bundle is the fork of its directory.
func TestStreamedForkOfPackedReadsTheWholeArchive(t *testing.T) {
	t.Parallel()
	src := saveTemp(t, tenSteps(t), "ten.sftrace")
	dir := t.TempDir()
	good := filepath.Join(dir, "ten"+trace.PackedSuffix)
	if err := trace.Pack(src, good); err != nil {
		t.Fatal(err)
	}
	fromDir := filepath.Join(t.TempDir(), "dir.sftrace")
	fromPacked := filepath.Join(t.TempDir(), "packed.sftrace")
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	if _, err := Trace(src, ThroughStep(1), testOpts{OutputPath: fromDir, RunID: "run_f", Now: now}.list()...); err != nil {
		t.Fatal(err)
	}
	if _, err := Trace(good, ThroughStep(1), testOpts{OutputPath: fromPacked, RunID: "run_f", Now: now}.list()...); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{trace.ManifestFile, trace.EventsFile} {
		a, _ := os.ReadFile(filepath.Join(fromDir, name))
		b, _ := os.ReadFile(filepath.Join(fromPacked, name))
		if !bytes.Equal(a, b) {
			t.Errorf("%s of the fork of the packed bundle differs from the fork of its directory", name)
		}
	}

	// The archive again, with a second manifest after events.jsonl.
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tr := tar.NewReader(zr)
	var manifest []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if strings.HasSuffix(h.Name, "/"+trace.ManifestFile) {
			manifest = body
		}
		tw.WriteHeader(h)
		tw.Write(body)
	}
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "ten.sftrace/" + trace.ManifestFile, Mode: 0o644, Size: int64(len(manifest))})
	tw.Write(manifest)
	tw.Close()
	zw.Close()
	bad := filepath.Join(dir, "bad"+trace.PackedSuffix)
	if err := os.WriteFile(bad, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out.sftrace")
	_, err = Trace(bad, ThroughStep(1), SaveTo(out))
	if !errors.Is(err, trace.ErrCorruptPacked) || !strings.Contains(err.Error(), "follows events.jsonl") {
		t.Errorf("fork of a packed bundle with an entry after events.jsonl: %v, want ErrCorruptPacked", err)
	}
	if _, err := os.Lstat(out); err == nil {
		t.Error("the refused fork was saved")
	}
}
