package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostileMaxRSS bounds the peak memory of one command refusing a hostile
// bundle: the binary's own footprint and a few MB. Reading any of the
// hostile files whole would cost a gigabyte or never end.
const hostileMaxRSS = 64 << 20

// hostileLimit is the peak memory a command may report: hostileMaxRSS, or,
// when the test process itself has grown past it, its own peak and a margin.
// Linux starts a child made with vfork, as os/exec makes them, from the
// parent's high-water mark (exec folds the shared memory's peak into the
// child's), so under -race, with subtests running in parallel, a command
// that uses a few MB reports the test binary's 64 MB or more. Reading a
// hostile file whole would still cost a gigabyte or never end.
func hostileLimit() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return max(hostileMaxRSS, ru.Maxrss<<10+16<<20)
}

// hostileTimeout ends a command that hangs (on a FIFO, say); refusing a
// hostile bundle takes milliseconds.
const hostileTimeout = 20 * time.Second

// boundedRun runs the binary like stepfork, and also returns its peak
// resident memory; a run that outlives hostileTimeout is killed and fails
// the test.
func boundedRun(t *testing.T, dir string, args ...string) (result, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("stepfork %s hangs: killed after %v", strings.Join(args, " "), hostileTimeout)
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("stepfork %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	rss := int64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) << 10 // KiB on Linux
	return result{stdout.String(), stderr.String(), code}, rss
}

// hostileKinds are the ways a bundle file can be made hostile: replaced by
// something that must never be read whole, or read at all.
var hostileKinds = []struct {
	name string
	make func(t *testing.T, path string) // replaces the file at path
	// sized is true for the kinds that only the files with a size limit
	// refuse (events.jsonl is streamed line by line instead).
	sized bool
}{
	{"fifo", func(t *testing.T, p string) {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}, false},
	{"device", func(t *testing.T, p string) {
		// A character device node of /dev/zero inside the bundle.
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o644, 1<<8|5); err != nil {
			t.Skipf("cannot create a device node here (%v); the /dev/zero link case covers devices outside the bundle", err)
		}
	}, false},
	{"devzero-link", func(t *testing.T, p string) {
		if err := os.Symlink("/dev/zero", p); err != nil {
			t.Fatal(err)
		}
	}, false},
	{"oversized", func(t *testing.T, p string) {
		// A valid start followed by a gigabyte (sparse: nothing is written).
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(`{"schema_version": "0.1"}`); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(1 << 30); err != nil {
			t.Fatal(err)
		}
	}, true},
}

// TestHostileBundleFiles replaces each file of a bundle in turn by a FIFO, a
// device, a link to /dev/zero or a gigabyte-sized file, and runs every
// command that reads a bundle on it: each refuses it at once (no hang),
// exits non-zero, and never reads the file whole (a few MB of memory).
func TestHostileBundleFiles(t *testing.T) {
	t.Parallel()
	// A fork, so that the bundle has a fork.json listed in integrity.json.
	work := t.TempDir()
	base := filepath.Join(work, "base.sftrace")
	if r := stepfork(t, work, nil, "fork", filepath.Join(mustAbs(t, booking)), "--at-step", "12", "-o", base); r.code != 0 {
		t.Fatalf("fork: exit %d\n%s", r.code, r.stderr)
	}
	files := []string{"manifest.json", "events.jsonl", "redactions.json", "integrity.json", "fork.json"}
	for _, file := range files {
		for _, kind := range hostileKinds {
			if kind.sized && file == "events.jsonl" {
				continue
			}
			t.Run(file+"/"+kind.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				bad := filepath.Join(dir, "bad.sftrace")
				copyBundle(t, base, bad)
				p := filepath.Join(bad, file)
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				kind.make(t, p)
				ref := mustAbs(t, booking)
				commands := [][]string{
					{"validate", bad, "--verify-integrity"},
					{"inspect", bad},
					{"inspect", bad, "--json"},
					{"points", bad},
					{"diff", bad, ref},
					{"diff", ref, bad, "--json"},
					{"minimize", bad, "-o", filepath.Join(dir, "min.sftrace")},
					{"export", bad, "--otlp"},
					{"export", bad, "--go-test", "--agent", "Run", "-o", filepath.Join(dir, "x_test.go")},
					{"fork", bad, "--at-step", "1", "-o", filepath.Join(dir, "f.sftrace")},
				}
				if file != "fork.json" && file != "integrity.json" {
					// Without --verify-integrity, validate reads neither.
					commands = append(commands, []string{"validate", bad})
				}
				for _, args := range commands {
					r, rss := boundedRun(t, dir, args...)
					line := strings.Join(args, " ")
					if r.code == 0 {
						t.Errorf("stepfork %s: exit 0 on a bundle whose %s is a %s\nstdout:\n%s", line, file, kind.name, r.stdout)
					}
					if limit := hostileLimit(); rss > limit {
						t.Errorf("stepfork %s: peak memory %d MB, want at most %d MB", line, rss>>20, limit>>20)
					}
					if r.stdout+r.stderr == "" {
						t.Errorf("stepfork %s: exit %d with no message", line, r.code)
					}
				}
				// --verify-integrity says what the file is.
				r, _ := boundedRun(t, dir, "validate", bad, "--verify-integrity")
				if strings.Contains(r.stdout, file+" is missing") {
					t.Errorf("validate --verify-integrity calls a %s %s missing:\n%s", kind.name, file, r.stdout)
				}
			})
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
