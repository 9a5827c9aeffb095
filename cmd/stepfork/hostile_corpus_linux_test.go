package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stepfork/stepfork/internal/hostile"
	"github.com/stepfork/stepfork/trace"
)

// TestHostileCorpus runs every command that reads a bundle on every input
// of the hostile corpus (internal/hostile): each answers (no hang, no
// panic) with a non-zero exit and a message, in under a second of CPU time
// and within hostileMaxRSS of memory (each measured on its own), and none says VERIFIED or passes
// validation, except where the command does not read what is hostile
// (validate without --verify-integrity reads no extra file; pack copies
// lines without reading them; a fork of the first step of a directory
// bundle reads no further).
func TestHostileCorpus(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	base := filepath.Join(work, "base.sftrace")
	if r := stepfork(t, work, nil, "fork", mustAbs(t, booking), "--at-step", "12", "-o", base); r.code != 0 {
		t.Fatalf("fork: exit %d\n%s", r.code, r.stderr)
	}
	ref := mustAbs(t, booking)
	var peak peakUsage
	t.Cleanup(func() { t.Logf("the most any command used: %s", peak.String()) })
	for _, in := range hostile.Corpus(base) {
		t.Run(in.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			bad := in.Make(t, dir)
			packed := strings.HasSuffix(bad, trace.PackedSuffix)
			commands := [][]string{
				{"validate", bad}, {"validate", bad, "--verify-integrity"}, {"validate", bad, "--json", "--partial", "--verify-integrity"},
				{"inspect", bad}, {"inspect", bad, "--json"}, {"inspect", bad, "--events"}, {"points", bad},
				{"diff", bad, ref}, {"diff", ref, bad, "--json"}, {"diff", bad, ref, "--align", "position"},
				{"minimize", bad, "-o", filepath.Join(dir, "min.sftrace")},
				{"export", bad, "--otlp"},
				{"export", bad, "--go-test", "--agent", "Run", "-o", filepath.Join(dir, "x_test.go")},
				{"fork", bad, "--at-step", "1", "-o", filepath.Join(dir, "f.sftrace")},
				{"view", bad, "--html", filepath.Join(dir, "v.html")},
			}
			if packed {
				commands = append(commands, []string{"unpack", bad, "-o", filepath.Join(dir, "u.sftrace")})
			} else {
				commands = append(commands, []string{"pack", bad, "-o", filepath.Join(dir, "p"+trace.PackedSuffix)})
			}
			for _, args := range commands {
				if in.Large && args[0] != "validate" {
					continue // only large: what reads it may take its time
				}
				r, use := boundedRun(t, dir, args...)
				line := strings.Join(args, " ")
				integrity := slices.Contains(args, "--verify-integrity")
				accepts := in.Extra && args[0] == "validate" && !integrity ||
					in.Lines && !packed && (args[0] == "pack" || args[0] == "fork")
				switch {
				case strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "goroutine "):
					t.Errorf("stepfork %s panics:\n%.3000s", line, r.stderr)
				case r.stdout+r.stderr == "":
					t.Errorf("stepfork %s: exit %d with no message", line, r.code)
				case accepts:
				case r.code == 0:
					t.Errorf("stepfork %s: exit 0\nstdout:\n%.2000s", line, r.stdout)
				case strings.Contains(r.stdout, "VERIFIED") || strings.Contains(r.stdout, "Validation passed") || strings.Contains(r.stdout, `"valid": true`):
					t.Errorf("stepfork %s passes a hostile bundle:\n%.2000s", line, r.stdout)
				}
				if integrity && strings.Contains(in.Name, "/fifo") && strings.Contains(r.stdout, " is missing") {
					t.Errorf("stepfork %s calls a FIFO missing:\n%.2000s", line, r.stdout)
				}
				if use.MaxRSS > hostileMaxRSS {
					t.Errorf("stepfork %s: peak memory %d MB, want at most %d MB", line, use.MaxRSS>>20, hostileMaxRSS>>20)
				}
				if use.CPU > hostileCPU {
					t.Errorf("stepfork %s: %v of CPU time, want under %v", line, use.CPU, hostileCPU)
				}
				peak.note(line, use)
				if n := strings.Count(r.stdout, "\n"); n > 5000 {
					t.Errorf("stepfork %s: %d lines of output", line, n)
				}
			}
		})
	}
}

// TestHostileReport gives stepfork report results that are not results: a
// FIFO, a link to /dev/zero, a sparse gigabyte. Each is refused at once.
func TestHostileReport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.jsonl")
	zero := filepath.Join(dir, "zero.jsonl")
	big := filepath.Join(dir, "big.jsonl")
	for _, err := range []error{
		syscall.Mkfifo(fifo, 0o644),
		os.Symlink("/dev/zero", zero),
		os.WriteFile(big, []byte("{}"), 0o644),
		os.Truncate(big, 1<<30),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{fifo, zero, big} {
		r, use := boundedRun(t, dir, "report", p)
		if r.code != exitInput || r.stderr == "" {
			t.Errorf("report %s: exit %d, %q", filepath.Base(p), r.code, r.stderr)
		}
		if use.MaxRSS > hostileMaxRSS || use.CPU > hostileCPU {
			t.Errorf("report %s: %d MB, %v of CPU", filepath.Base(p), use.MaxRSS>>20, use.CPU)
		}
	}
}

// peakUsage keeps the largest CPU time and memory of the commands run, and
// the command lines that used them.
type peakUsage struct {
	mu           sync.Mutex
	cpu, rss     hostile.Usage
	cpuBy, rssBy string
}

func (p *peakUsage) note(line string, u hostile.Usage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if u.CPU > p.cpu.CPU {
		p.cpu, p.cpuBy = u, line
	}
	if u.MaxRSS > p.rss.MaxRSS {
		p.rss, p.rssBy = u, line
	}
}

func (p *peakUsage) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%v of CPU time (stepfork %s), %d MB of memory (stepfork %s)", p.cpu.CPU, p.cpuBy, p.rss.MaxRSS>>20, p.rssBy)
}
