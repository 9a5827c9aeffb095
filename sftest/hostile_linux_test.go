package sftest_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/hostile"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

// hostileCPU and hostileRSS bound what one child spends refusing one
// hostile input through every entry point: reading what it refuses would
// take seconds and a gigabyte, or never end.
const (
	hostileCPU = time.Second
	hostileRSS = 100 << 20
)

// TestMain removes what hostile.Run built to measure the children.
func TestMain(m *testing.M) {
	code := m.Run()
	hostile.Cleanup()
	os.Exit(code)
}

// hostileEntries are the entry points a child runs on one input, each in
// its own subtest.
var hostileEntries = []string{"Load", "Load-SkipVerify", "Record", "Corpus"}

// TestChildHostile runs every sftest entry point that reads a bundle on
// the input SFTEST_HOSTILE names: Load, Load with SkipVerify, Record
// (replaying testdata/run.sftrace, the input) and Corpus over testdata/;
// or, with SFTEST_HOSTILE_FILE, Golden and assert.LoadExpectations on a
// golden and an expectations file that are hostile.
func TestChildHostile(t *testing.T) {
	child(t)
	agent := replay.Typed(func(context.Context, any) (any, error) { return nil, nil })
	if f := os.Getenv("SFTEST_HOSTILE_FILE"); f != "" {
		t.Run("Golden", func(t *testing.T) {
			tr, err := trace.Load(os.Getenv("SFTEST_HOSTILE_TRACE"))
			if err != nil {
				t.Fatal(err)
			}
			sftest.Golden(t, tr)
		})
		t.Run("LoadExpectations", func(t *testing.T) {
			if _, err := assert.LoadExpectations(f); err != nil {
				t.Fatal(err)
			}
		})
		return
	}
	p := os.Getenv("SFTEST_HOSTILE")
	t.Run("Load", func(t *testing.T) { sftest.Load(t, p) })
	t.Run("Load-SkipVerify", func(t *testing.T) { sftest.Load(t, p, sftest.SkipVerify()) })
	if strings.HasSuffix(p, ".sftrace") { // Record looks for testdata/NAME.sftrace only
		t.Run("Record", func(t *testing.T) { sftest.Record(t, "run", nil, agent) })
	}
	t.Run("Corpus", func(t *testing.T) { sftest.Corpus(t, "testdata", agent) })
}

// runHostileChild runs TestChildHostile in dir with env and returns what
// it did and used, measured on its own (hostile.Run); it fails t when the
// child outlives a timeout.
func runHostileChild(t *testing.T, dir string, env ...string) hostile.Result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env = append([]string{"SFTEST_CHILD=1", "TEST_TOTAL_SHARDS=", "TEST_SHARD_INDEX=", "TEST_SHARD_STATUS_FILE="}, env...)
	r, err := hostile.Run(30*time.Second, dir, env, exe, "-test.run=^TestChildHostile$", "-test.v", "-test.count=1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Hung {
		t.Fatalf("the child hangs: killed after 30s\n%.3000s", r.Stdout+r.Stderr)
	}
	return r
}

var subtestResult = regexp.MustCompile(`--- (PASS|FAIL|SKIP): TestChildHostile/(\S+)`)

// checkHostileChild checks what one child did: no panic, every entry
// point answered, each failing (but those accepts names) with a message of
// sftest's, within hostileCPU and the memory limit.
func checkHostileChild(t *testing.T, r hostile.Result, entries []string, accepts func(entry string) bool) {
	t.Helper()
	out := r.Stdout + r.Stderr
	if strings.Contains(out, "panic:") {
		t.Fatalf("the child panics:\n%.4000s", out)
	}
	got := map[string]string{}
	for _, m := range subtestResult.FindAllStringSubmatch(out, -1) {
		got[m[2]] = m[1]
	}
	for _, e := range entries {
		switch {
		case got[e] == "":
			t.Errorf("%s did not answer:\n%.4000s", e, out)
		case got[e] == "PASS" && !accepts(e):
			t.Errorf("%s accepted it:\n%.4000s", e, out)
		}
	}
	t.Logf("%d entry points: %v of CPU time, peak memory %d MB", len(entries), r.CPU, r.MaxRSS>>20)
	if r.CPU > hostileCPU {
		t.Errorf("%v of CPU time for %d entry points, want under %v", r.CPU, len(entries), hostileCPU)
	}
	if r.MaxRSS > hostileRSS {
		t.Errorf("peak memory %d MB, want at most %d MB", r.MaxRSS>>20, hostileRSS>>20)
	}
}

// TestHostileEntryPoints runs every sftest entry point that reads a
// bundle on every input of the hostile corpus (internal/hostile), each
// input in a child process: every entry point refuses it with a message,
// none panics or hangs, and together they stay under a second of CPU time
// and 100 MB.
func TestHostileEntryPoints(t *testing.T) {
	t.Parallel()
	base := filepath.Join(t.TempDir(), "base.sftrace")
	if _, err := fork.Trace("testdata/refund-failure.sftrace", fork.ThroughStep(4), fork.SaveTo(base)); err != nil {
		t.Fatal(err)
	}
	for _, in := range hostile.Corpus(base) {
		if in.Large || in.Name == "dir/60MB-line" {
			// Only large: a bundle of 50,000 lines, or a line the
			// library reads (up to trace.MaxLineBytes, 64 MiB).
			continue
		}
		t.Run(in.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			testdata := filepath.Join(dir, "testdata")
			if err := os.Mkdir(testdata, 0o755); err != nil {
				t.Fatal(err)
			}
			p := in.Make(t, testdata)
			r := runHostileChild(t, dir, "SFTEST_HOSTILE="+p)
			entries := hostileEntries
			if !strings.HasSuffix(p, ".sftrace") {
				entries = slices.DeleteFunc(slices.Clone(entries), func(e string) bool { return e == "Record" })
			}
			checkHostileChild(t, r, entries, func(e string) bool {
				// SkipVerify reads no integrity.json; Record and Corpus
				// replay what they load, and fail on a run of another
				// agent anyway.
				return in.Extra && e == "Load-SkipVerify"
			})
		})
	}
}

// TestHostileFiles gives Golden and assert.LoadExpectations files that are
// not files: a FIFO, a link to /dev/zero, a sparse gigabyte, a directory.
func TestHostileFiles(t *testing.T) {
	t.Parallel()
	refund, err := filepath.Abs("testdata/refund-failure.sftrace")
	if err != nil {
		t.Fatal(err)
	}
	for name, mk := range map[string]func(p string) error{
		"fifo":         func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"devzero-link": func(p string) error { return os.Symlink("/dev/zero", p) },
		"sparse-gigabyte": func(p string) error {
			if err := os.WriteFile(p, []byte("a rendering"), 0o644); err != nil {
				return err
			}
			return os.Truncate(p, 1<<30)
		},
		"directory": func(p string) error { return os.Mkdir(p, 0o755) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			golden := filepath.Join(dir, "testdata", "TestChildHostile", "Golden.golden")
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			expect := filepath.Join(dir, "expect.json")
			for _, p := range []string{golden, expect} {
				if err := mk(p); err != nil {
					t.Fatal(err)
				}
			}
			r := runHostileChild(t, dir, "SFTEST_HOSTILE_FILE="+expect, "SFTEST_HOSTILE_TRACE="+refund)
			checkHostileChild(t, r, []string{"Golden", "LoadExpectations"}, func(string) bool { return false })
			if n := len(regexp.MustCompile(`not a regular file|more than the limit`).FindAllString(r.Stdout, -1)); n < 2 {
				t.Errorf("the refusals do not say what was refused:\n%.3000s", r.Stdout)
			}
		})
	}
}
