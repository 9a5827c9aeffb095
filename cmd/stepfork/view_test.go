package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestViewHTML(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fixed := filepath.Join(dir, "booking-fixed.sftrace")
	if r := stepfork(t, "", nil, "fork", booking, "--at-step", "11", "--override", `11={"booking_ref":"PNR-6E1158","status":"confirmed"}`, "-o", fixed); r.code != 0 {
		t.Fatalf("fork: %d %s", r.code, r.stderr)
	}
	out := filepath.Join(dir, "diff.html")
	r := stepfork(t, "", nil, "view", booking, fixed, "--html", out)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Wrote the diff of run_booking_agent_0001 and ") || !strings.Contains(r.stdout, out) {
		t.Fatalf("view --html: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first divergence", `<tr id="d-5" class="k-changed div">`, "book_flight"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// One packed bundle is a run to view (it was taken for a sweep directory:
// "cannot read the sweep directory: … not a directory"); the help names
// the option that saves a sweep, fork.SaveDir.
func TestViewPackedBundleAndHelp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	packed := filepath.Join(dir, "booking.sftrace.tar.gz")
	if r := stepfork(t, "", nil, "pack", booking, "-o", packed); r.code != 0 {
		t.Fatalf("pack: exit %d: %s", r.code, r.stderr)
	}
	out := filepath.Join(dir, "run.html")
	r := stepfork(t, "", nil, "view", packed, "--html", out)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Wrote the run run_booking_agent_0001: ") {
		t.Errorf("view of one packed bundle: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	h := stepfork(t, "", nil, "help", "view")
	if !strings.Contains(h.stdout, "a sweep saved with fork.SaveDir") || strings.Contains(h.stdout, "fork.SaveTo") {
		t.Errorf("view's help does not name fork.SaveDir:\n%s", h.stdout)
	}
}

func TestViewErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args      []string
		code      int
		stderrHas string
	}{
		{[]string{"view"}, 2, "stepfork view: missing argument PATH"},
		{[]string{"view", "a", "b", "c"}, 2, `stepfork view: unexpected argument "c"`},
		{[]string{"view", "../../testdata/nope.sftrace"}, 2, "stepfork view: "},
		{[]string{"view", booking, "--html", filepath.Join(t.TempDir(), "missing", "x.html")}, 1, "stepfork view: view: cannot write"},
	}
	for _, tt := range tests {
		r := stepfork(t, "", nil, tt.args...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.stderrHas) {
			t.Errorf("stepfork %q: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.stderr, tt.code, tt.stderrHas)
		}
	}
}

// TestViewServes runs the server as a user does: it prints a loopback URL,
// serves the page there, and stops on Ctrl-C (SIGINT) with exit 0. --open
// without a browser to open is a message, not a failure.
func TestViewServes(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "view", booking, "--open")
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir()) // no xdg-open
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no URL printed: %v (stderr %q)", err, stderr.String())
	}
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`).FindString(line)
	if url == "" || !strings.HasPrefix(line, "Serving the run run_booking_agent_0001 at ") {
		t.Fatalf("printed %q", line)
	}
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/html; charset=utf-8" || !strings.Contains(string(body), "PaymentDeclined") {
		t.Errorf("GET %s: %d %q", url, res.StatusCode, res.Header.Get("Content-Type"))
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after Ctrl-C: %v (stderr %q)", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the server did not stop on Ctrl-C")
	}
	if !strings.Contains(stderr.String(), "cannot open a browser") {
		t.Errorf("--open without a browser said %q", stderr.String())
	}
}
