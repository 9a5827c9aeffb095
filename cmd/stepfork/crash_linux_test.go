package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestForkOverwriteCrash kills `stepfork fork … --overwrite` at each fsync
// and rename of writing the fork in turn (the binary is built with the
// stepfork_crashtest tag, which lets STEPFORK_CRASH_AT=k kill it at the k-th
// step): after every kill the destination validates with its integrity
// verified, and the next fork --overwrite succeeds and leaves nothing beside
// the destination.
func TestForkOverwriteCrash(t *testing.T) {
	t.Parallel()
	crashBinary := filepath.Join(t.TempDir(), "stepfork-crashtest")
	if out, err := exec.Command("go", "build", "-buildvcs=false", "-tags", "stepfork_crashtest", "-o", crashBinary, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags stepfork_crashtest: %v\n%s", err, out)
	}
	for _, fallback := range []bool{false, true} {
		t.Run(map[bool]string{false: "exchange", true: "two-renames"}[fallback], func(t *testing.T) {
			t.Parallel()
			killedOnce := false
			for k := 1; ; k++ {
				if k > 30 {
					t.Fatal("the fork was still being killed after 30 steps")
				}
				dir := t.TempDir()
				dest := filepath.Join(dir, "fork.sftrace")
				if r := stepfork(t, dir, nil, "fork", mustAbs(t, booking), "--at-step", "3", "-o", dest); r.code != 0 {
					t.Fatalf("first fork: exit %d\n%s", r.code, r.stderr)
				}
				cmd := exec.Command(crashBinary, "fork", mustAbs(t, booking), "--at-step", "7", "-o", dest, "--overwrite")
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "STEPFORK_CRASH_AT="+strconv.Itoa(k))
				if fallback {
					cmd.Env = append(cmd.Env, "STEPFORK_CRASH_FALLBACK=1")
				}
				err := cmd.Run()
				var ee *exec.ExitError
				killed := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled()
				if err != nil && !killed {
					t.Fatalf("k=%d: fork --overwrite: %v", k, err)
				}
				_, statErr := os.Lstat(dest)
				switch {
				case statErr == nil:
					if r := stepfork(t, dir, nil, "validate", dest, "--verify-integrity"); r.code != 0 {
						t.Errorf("k=%d: after the kill the destination does not validate (exit %d):\n%s", k, r.code, r.stdout)
					}
				case fallback:
					// Between the two renames; the next save restores the backup.
				default:
					t.Errorf("k=%d: after the kill the destination is missing: %v", k, statErr)
				}
				if r := stepfork(t, dir, nil, "fork", mustAbs(t, booking), "--at-step", "5", "-o", dest, "--overwrite"); r.code != 0 {
					t.Fatalf("k=%d: the next fork --overwrite: exit %d\n%s", k, r.code, r.stderr)
				}
				if r := stepfork(t, dir, nil, "inspect", dest, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"events":6,`) {
					t.Errorf("k=%d: the next fork did not write its bundle (exit %d): %.200s", k, r.code, r.stdout)
				}
				entries, _ := os.ReadDir(dir)
				if len(entries) != 1 {
					var names []string
					for _, e := range entries {
						names = append(names, e.Name())
					}
					t.Errorf("k=%d: the next fork left %v beside the destination", k, names)
				}
				if !killed {
					if !killedOnce {
						t.Fatal("the fork was never killed: the crash hook is not built in")
					}
					return // every step has had its kill
				}
				killedOnce = true
			}
		})
	}
}
