package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepfork/stepfork/internal/hostile"
)

// hostileMaxRSS bounds the peak memory of one command refusing a hostile
// bundle: the binary's own footprint and a few MB. Reading any of the
// hostile files whole would cost a gigabyte or never end.
const hostileMaxRSS = 64 << 20

// hostileCPU bounds the CPU time of one command refusing a hostile input:
// refusing reads a few kilobytes; reading what it refuses would take
// seconds. (CPU time, not wall time: the machine may be busy.)
const hostileCPU = time.Second

// hostileTimeout ends a command that hangs (on a FIFO, say); refusing a
// hostile bundle takes milliseconds.
const hostileTimeout = 20 * time.Second

// boundedRun runs the binary like stepfork and also returns what it used,
// measured on its own (hostile.Run); a run that outlives hostileTimeout is
// killed and fails the test.
func boundedRun(t *testing.T, dir string, args ...string) (result, hostile.Usage) {
	t.Helper()
	r, err := hostile.Run(hostileTimeout, dir, []string{"NO_COLOR=1"}, binary, args...)
	if err != nil {
		t.Fatalf("stepfork %s: %v", strings.Join(args, " "), err)
	}
	if r.Hung {
		t.Fatalf("stepfork %s hangs: killed after %v", strings.Join(args, " "), hostileTimeout)
	}
	return result{r.Stdout, r.Stderr, r.Code}, r.Usage
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
