package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackedEveryCommand packs bundles with stepfork pack and runs every
// command on the packed file and on the directory: the outputs are the same
// but for the path, and the exit codes too.
func TestPackedEveryCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bundles := map[string]string{} // dir → packed
	for _, src := range []string{booking, vectors + "failed_tool_run.sftrace", vectors + "legacy_v01.sftrace"} {
		d := filepath.Join(dir, filepath.Base(src))
		copyBundle(t, src, d)
		r := stepfork(t, "", nil, "pack", d)
		want := strings.TrimSuffix(d, ".sftrace") + ".sftrace.tar.gz"
		if r.code != 0 || r.stdout != want+"\n" {
			t.Fatalf("pack %s: exit %d, stdout %q, stderr %q", d, r.code, r.stdout, r.stderr)
		}
		bundles[d] = want
	}
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	for d, p := range bundles {
		for _, args := range [][]string{
			{"validate", "%s", "--verify-integrity"},
			{"validate", "%s", "--strict", "--json"},
			{"inspect", "%s", "--json"},
			{"inspect", "%s", "--events"},
			{"points", "%s"},
			{"diff", "%s", d},
			{"export", "%s", "--otlp"},
			{"fork", "%s", "--at-step", "1", "-o", filepath.Join(out, "f.sftrace"), "--overwrite"},
			{"minimize", "%s", "-o", filepath.Join(out, "m.sftrace"), "--overwrite"},
		} {
			run := func(path string) result {
				a := make([]string, len(args))
				for i, s := range args {
					a[i] = strings.ReplaceAll(s, "%s", path)
				}
				r := stepfork(t, "", nil, a...)
				for _, s := range []string{p, d} { // d is a prefix of p
					r.stdout = strings.ReplaceAll(r.stdout, s, "BUNDLE")
					r.stderr = strings.ReplaceAll(r.stderr, s, "BUNDLE")
				}
				return r
			}
			w, g := run(d), run(p)
			if args[0] == "fork" {
				// A fork names a new run id: compare what does not vary.
				w.stdout, g.stdout = "", ""
			}
			if w != g {
				t.Errorf("stepfork %s on %s:\ndirectory: exit %d\n%s%s\npacked: exit %d\n%s%s", args[0], filepath.Base(d), w.code, w.stdout, w.stderr, g.code, g.stdout, g.stderr)
			}
		}
	}

	// unpack gives back the directory, byte for byte.
	for d, p := range bundles {
		back := filepath.Join(out, "back-"+filepath.Base(d))
		if r := stepfork(t, "", nil, "unpack", p, "-o", back); r.code != 0 {
			t.Fatalf("unpack: %+v", r)
		}
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			w, _ := os.ReadFile(filepath.Join(d, e.Name()))
			g, err := os.ReadFile(filepath.Join(back, e.Name()))
			if err != nil || string(w) != string(g) {
				t.Errorf("%s/%s differs after unpack (%v)", back, e.Name(), err)
			}
		}
	}

	// A corrupted packed file is refused by every command, with the reason.
	p := bundles[filepath.Join(dir, "booking-agent.sftrace")]
	data, _ := os.ReadFile(p)
	bad := filepath.Join(dir, "bad.sftrace.tar.gz")
	os.WriteFile(bad, data[:len(data)/2], 0o644)
	for _, cmd := range []string{"validate", "inspect", "points", "unpack"} {
		r := stepfork(t, "", nil, cmd, bad)
		if r.code != exitInput && r.code != exitDifferent || !strings.Contains(r.stdout+r.stderr, "corrupt packed bundle") {
			t.Errorf("stepfork %s on a truncated packed bundle: exit %d\n%s%s", cmd, r.code, r.stdout, r.stderr)
		}
	}
}
