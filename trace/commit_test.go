//go:build unix

package trace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The crash tests run this test binary again as a child that saves a bundle
// with Overwrite and kills itself (SIGKILL: no deferred function, no cleanup)
// at the k-th step of the commit that commitHook reports.
const (
	crashDestEnv     = "STEPFORK_TEST_CRASH_DEST"     // the bundle the child saves
	crashAtEnv       = "STEPFORK_TEST_CRASH_AT"       // k; 0 saves to the end and lists the steps
	crashFallbackEnv = "STEPFORK_TEST_CRASH_FALLBACK" // "1": no exchange, two renames
)

// crashChild runs the child's part when the environment asks for it, and
// then exits; it returns otherwise. TestMain calls it first.
func crashChild() {
	dest := os.Getenv(crashDestEnv)
	if dest == "" {
		return
	}
	k, _ := strconv.Atoi(os.Getenv(crashAtEnv))
	noExchange = os.Getenv(crashFallbackEnv) == "1"
	var steps []string
	commitHook = func(step string) {
		steps = append(steps, step)
		if len(steps) == k {
			p, _ := os.FindProcess(os.Getpid())
			p.Signal(os.Kill)
			select {} // the signal arrives
		}
	}
	if err := crashRun("new", 200).Save(dest, Overwrite()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(strings.Join(steps, "\n"))
	os.Exit(0)
}

// crashRun is a small run of agent name with n tool calls.
func crashRun(name string, n int) *Trace {
	b := NewBuilder(name)
	b.RunStart(map[string]any{"q": name})
	for i := range n {
		b.Tool("search", map[string]any{"i": i}, map[string]any{"pad": strings.Repeat("x", 100)})
	}
	b.RunEnd(RunCompleted, "done")
	return b.MustTrace()
}

// runCrashChild runs the child for dest, killed at step k (0: not killed),
// and returns the steps it went through when it was not killed.
func runCrashChild(t *testing.T, dest string, k int, fallback bool) (steps []string, killed bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashDestEnv+"="+dest, crashAtEnv+"="+strconv.Itoa(k))
	if fallback {
		cmd.Env = append(cmd.Env, crashFallbackEnv+"=1")
	}
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return nil, true
		}
		t.Fatalf("child: %v\n%s", err, ee.Stderr)
	}
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n"), false
}

// bundleAgent returns the agent name of the bundle at path after checking
// that it validates strictly with its integrity verified; "" when path is
// missing.
func bundleAgent(t *testing.T, path string) string {
	t.Helper()
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if rep := ValidateBundle(context.Background(), path, CheckIntegrity()); !rep.Valid() {
		t.Fatalf("%s does not validate: %v", path, rep.Err())
	}
	if res := VerifyIntegrity(path); res.Status != IntegrityVerified {
		t.Fatalf("%s: integrity %s %+v", path, res.Status, res.Issues)
	}
	tr, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tr.AgentName
}

// TestOverwriteCrash kills a Save with Overwrite at each fsync and rename of
// the commit in turn. With the exchange (Linux), the destination is a
// complete bundle, old or new, after every kill; with the two renames that
// stand in for it elsewhere, it may be missing only between them, with the
// old bundle in a backup. Either way the next Save of the path deals with
// the leftovers: it restores the backup when the path is missing (and then
// refuses to overwrite it without Overwrite), and removes every temporary
// directory and backup of the dead save.
func TestOverwriteCrash(t *testing.T) {
	t.Parallel()
	modes := []bool{true}
	if _, ok := renameat2(); ok {
		modes = append(modes, false)
	}
	for _, fallback := range modes {
		t.Run(map[bool]string{true: "two-renames", false: "exchange"}[fallback], func(t *testing.T) {
			t.Parallel()
			probe := filepath.Join(t.TempDir(), "run.sftrace")
			if err := crashRun("old", 1).Save(probe); err != nil {
				t.Fatal(err)
			}
			steps, killed := runCrashChild(t, probe, 0, fallback)
			if killed || bundleAgent(t, probe) != "new" {
				t.Fatalf("a save that is not killed did not replace the bundle")
			}
			want := []string{"fsync events.jsonl", "fsync manifest.json", "fsync redactions.json", "fsync integrity.json",
				"fsync temporary directory", "exchange", "fsync parent directory", "remove old"}
			if fallback {
				want = []string{"fsync events.jsonl", "fsync manifest.json", "fsync redactions.json", "fsync integrity.json",
					"fsync temporary directory", "rename old", "rename new", "fsync parent directory", "remove old"}
			}
			if !slices.Equal(steps, want) {
				t.Fatalf("steps of an overwrite = %q, want %q", steps, want)
			}
			n := len(steps)
			for k := 1; k <= n; k++ {
				t.Run(strconv.Itoa(k), func(t *testing.T) {
					t.Parallel()
					dest := filepath.Join(t.TempDir(), "run.sftrace")
					if err := crashRun("old", 1).Save(dest); err != nil {
						t.Fatal(err)
					}
					if _, killed := runCrashChild(t, dest, k, fallback); !killed {
						t.Fatalf("the child was not killed at step %d", k)
					}
					left := siblings(t, dest)
					got := bundleAgent(t, dest)
					if fallback && steps[k-1] == "rename new" && got != "" {
						t.Errorf("killed between the two renames, the destination holds %q; want it missing", got)
					}
					switch {
					case got == "old", got == "new":
					case got == "" && fallback:
						// Between the two renames: the old bundle is in a backup,
						// which the next save restores.
						if len(left) == 0 || !strings.Contains(strings.Join(left, " "), bakInfix) {
							t.Fatalf("the bundle is missing and no backup is left: %v", left)
						}
						err := crashRun("third", 1).Save(dest)
						if !errors.Is(err, fs.ErrExist) {
							t.Fatalf("Save without Overwrite after restoring the backup: %v, want an error matching fs.ErrExist", err)
						}
						if got := bundleAgent(t, dest); got != "old" {
							t.Fatalf("after the next save, the bundle is %q, want the restored old bundle", got)
						}
					default:
						t.Fatalf("after a kill at step %d the destination holds %q, want old or new (left: %v)", k, got, left)
					}
					if err := crashRun("third", 1).Save(dest, Overwrite()); err != nil {
						t.Fatal(err)
					}
					if got := bundleAgent(t, dest); got != "third" {
						t.Fatalf("the next save wrote %q", got)
					}
					if left := siblings(t, dest); len(left) != 0 {
						t.Errorf("the next save left %v beside the bundle", left)
					}
				})
			}
		})
	}
}

// TestLeftoversOfLiveSaves checks that a save leaves alone the temporary
// directory of a save that is still running (whose lock is held), and
// removes it once that save is gone.
func TestLeftoversOfLiveSaves(t *testing.T) {
	t.Parallel()
	dest := filepath.Join(t.TempDir(), "run.sftrace")
	w, err := NewBundleWriter(dest, crashRun("live", 0).Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := crashRun("other", 1).Save(dest); err != nil {
		t.Fatal(err)
	}
	if left := siblings(t, dest); len(left) != 1 || !strings.Contains(left[0], tmpInfix) {
		t.Fatalf("beside the bundle: %v, want the live writer's temporary directory", left)
	}
	// The writer's process is this one: its lock is not a dead save's lock
	// even to this process, since flock locks belong to open descriptors.
	if err := crashRun("other", 1).Save(dest, Overwrite()); err != nil {
		t.Fatal(err)
	}
	if left := siblings(t, dest); len(left) != 1 {
		t.Fatalf("a live save's directory was removed: %v", left)
	}
	w.Abort()
	if left := siblings(t, dest); len(left) != 0 {
		t.Fatalf("Abort left %v", left)
	}
}

// TestOverwriteNeverMissing overwrites a bundle again and again while
// another goroutine looks at its path: with the exchange, the path is never
// missing, and always holds a complete bundle.
func TestOverwriteNeverMissing(t *testing.T) {
	t.Parallel()
	if _, ok := renameat2(); !ok {
		t.Skip("no atomic exchange on this system: an overwrite has a window where the path is missing")
	}
	dest := filepath.Join(t.TempDir(), "run.sftrace")
	if err := crashRun("v0", 1).Save(dest); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	missing := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if !isBundle(dest) {
				select {
				case missing <- "the path is not a complete bundle":
				default:
				}
			}
		}
	}()
	for i := range 50 {
		if err := crashRun(fmt.Sprintf("v%d", i+1), 1).Save(dest, Overwrite()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	select {
	case m := <-missing:
		t.Fatal(m)
	default:
	}
}
