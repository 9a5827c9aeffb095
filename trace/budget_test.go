package trace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// withExtras saves a small trace with the given extra files.
func withExtras(t *testing.T, extras map[string][]byte) string {
	t.Helper()
	tr, err := Load(savedBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	tr.Extras = extras
	dst := filepath.Join(t.TempDir(), "x.sftrace")
	if err := tr.Save(dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// listExtras rewrites integrity.json of the bundle dir to list the given
// extra files too (with made-up digests).
func listExtras(t *testing.T, dir string, names []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, IntegrityFile))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, ",\n    %q: %q", n, strings.Repeat("0", 64))
	}
	text := strings.Replace(string(data), "\n  }\n}", b.String()+"\n  }\n}", 1)
	writeBundleFile(t, dir, IntegrityFile, text)
}

// TestExtrasBudget checks the budget of the extra files of a bundle: a
// bundle whose integrity.json lists too many, or whose extras are too large
// in all (sparse files, or links to one file, that cost no disk), is
// refused by every reader before they are read, and the directory and its
// packed form alike.
func TestExtrasBudget(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"1000 listed extras", func(t *testing.T, dir string) {
			var names []string
			for i := range 1000 {
				names = append(names, fmt.Sprintf("x%d.json", i))
			}
			listExtras(t, dir, names)
		}, "lists 1001 extra files, more than the limit of 32"},
		{"1000 hard links to one extra", func(t *testing.T, dir string) {
			names := []string{"a0.json"}
			huge(t, filepath.Join(dir, names[0]), maxExtraBytes)
			for i := 1; i < 1000; i++ {
				n := fmt.Sprintf("a%d.json", i)
				if err := os.Link(filepath.Join(dir, names[0]), filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
				names = append(names, n)
			}
			listExtras(t, dir, names)
		}, "more than the limit of 32"},
		{"three sparse extras of 16 MiB", func(t *testing.T, dir string) {
			names := []string{"a.json", "b.json", "c.json"}
			for _, n := range names {
				huge(t, filepath.Join(dir, n), maxExtraBytes)
			}
			listExtras(t, dir, names)
		}, "more than the limit of 33554432 bytes for a bundle"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := withExtras(t, map[string][]byte{"fork.json": []byte(`{}`)})
			tc.setup(t, dir)
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			before := m.TotalAlloc
			err := loadErr(t, dir)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v, want it to say %q", err, tc.want)
			}
			if _, err := ReadBehavior(dir, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadBehavior: %v, want it to say %q", err, tc.want)
			}
			res := VerifyIntegrity(dir)
			if res.Status != IntegrityMismatch || len(res.Issues) != 1 || !strings.Contains(res.Issues[0].Message, tc.want) {
				t.Errorf("VerifyIntegrity = %+v, want one issue saying %q", res, tc.want)
			}
			rep := ValidateBundle(context.Background(), dir, CheckIntegrity())
			if rep.Valid() || !strings.Contains(fmt.Sprint(rep.Issues), tc.want) {
				t.Errorf("ValidateBundle: %v, want an issue saying %q", rep.Issues, tc.want)
			}
			if err := Pack(dir, filepath.Join(t.TempDir(), "x"+PackedSuffix)); err == nil {
				t.Error("Pack packed it")
			}
			runtime.ReadMemStats(&m)
			if got := m.TotalAlloc - before; got > 8<<20 {
				// Other tests run in parallel: this is an upper bound.
				t.Logf("allocated %d MB", got>>20)
			}
		})
	}
}

func huge(t *testing.T, p string, size int64) {
	t.Helper()
	if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
}

// TestPackedExtras checks that a packed bundle's extra files are read as
// a directory's are.
func TestPackedExtras(t *testing.T) {
	t.Parallel()
	extras := map[string][]byte{"fork.json": []byte(`{"a": 1}`), LanesFile: []byte(`{"e1": 1}`)}
	dir := withExtras(t, extras)
	p := filepath.Join(t.TempDir(), "x"+PackedSuffix)
	if err := Pack(dir, p); err != nil {
		t.Fatal(err)
	}
	tr, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Extras) != 2 || string(tr.Extras["fork.json"]) != `{"a": 1}` || string(tr.Extras[LanesFile]) != `{"e1": 1}` {
		t.Errorf("Extras = %q", tr.Extras)
	}
	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := r.Extra("fork.json"); err != nil || string(got) != `{"a": 1}` {
		t.Errorf("Extra = %q, %v", got, err)
	}
	if rep := ValidateBundle(context.Background(), p, CheckIntegrity()); !rep.Valid() || rep.Integrity.Status != IntegrityVerified {
		t.Errorf("ValidateBundle: %v", rep.Issues)
	}
}

// TestReadDuringOverwrite reads a bundle while another goroutine replaces
// it again and again with one of another length: every read sees one
// bundle or the other, whole (its files read from the one directory opened),
// never files of both.
func TestReadDuringOverwrite(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the path holds a bundle at every instant only where directories are exchanged in one step")
	}
	mk := func(n int) *Trace {
		b := NewBuilder("overwrite")
		b.RunStart(map[string]any{"n": n})
		for i := range n {
			b.Tool("t", map[string]any{"i": i}, map[string]any{"n": n})
		}
		b.RunEnd(RunCompleted, n)
		return b.MustTrace()
	}
	runs := []*Trace{mk(1), mk(5)}
	path := filepath.Join(t.TempDir(), "run.sftrace")
	if err := runs[0].Clone().Save(path); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var saves atomic.Int64
	wg.Go(func() {
		for i := 1; !stop.Load(); i++ {
			if err := runs[i%2].Clone().Save(path, Overwrite()); err != nil {
				t.Errorf("save: %v", err)
				return
			}
			saves.Add(1)
		}
	})
	reads := 1000
	if testing.Short() {
		reads = 200
	}
	torn := 0
	for i := range reads {
		if i%2 == 0 {
			rep := ValidateBundle(context.Background(), path, CheckIntegrity())
			if !rep.Valid() {
				torn++
				t.Errorf("read %d: %v", i, rep.Issues)
			}
			continue
		}
		tr, err := Load(path)
		if err != nil {
			torn++
			t.Errorf("read %d: %v", i, err)
			continue
		}
		if tr.Totals.Events != len(tr.Events) {
			torn++
			t.Errorf("read %d: the manifest counts %d events, events.jsonl holds %d", i, tr.Totals.Events, len(tr.Events))
		}
	}
	stop.Store(true)
	wg.Wait()
	if saves.Load() < 10 {
		t.Logf("only %d saves overlapped the reads", saves.Load())
	}
	if torn > 0 {
		t.Errorf("%d torn reads of %d", torn, reads)
	}
}

// TestIssuesCapped checks that a report holds at most MaxIssues issues, the
// first in report order, and counts the others.
func TestIssuesCapped(t *testing.T) {
	t.Parallel()
	b := NewBuilder("dups")
	b.RunStart(nil)
	for i := range 3000 {
		b.State("k", i, i+1)
	}
	b.RunEnd(RunCompleted, nil)
	tr := b.MustTrace()
	for i := range tr.Events {
		if i > 0 {
			tr.Events[i].ID = tr.Events[1].ID // 3,001 duplicate ids
		}
	}
	path := bundleOf(t, tr)
	for name, rep := range map[string]*Report{"Validate": Validate(context.Background(), tr), "ValidateBundle": ValidateBundle(context.Background(), path)} {
		if len(rep.Issues) != MaxIssues || rep.Omitted == 0 || rep.OmittedErrors == 0 || rep.Valid() {
			t.Errorf("%s: %d issues, %d omitted (%d errors), valid %v; want %d, some omitted, invalid", name, len(rep.Issues), rep.Omitted, rep.OmittedErrors, rep.Valid(), MaxIssues)
			continue
		}
		if got := len(rep.Issues) + rep.Omitted; got < 3000 {
			t.Errorf("%s: %d issues in all, want at least 3,000", name, got)
		}
		if is := rep.Issues[0]; is.Code != CodeDuplicateEventID || is.Step == nil || *is.Step != 2 {
			t.Errorf("%s: first issue %v, want the duplicate at step 2", name, is)
		}
		if msg := rep.Err().Error(); strings.Count(msg, "\n") > 25 || !strings.Contains(msg, "… and ") {
			t.Errorf("%s: the error lists %d lines:\n%.300s", name, strings.Count(msg, "\n"), msg)
		}
	}
}
