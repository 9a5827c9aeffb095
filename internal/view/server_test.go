package view

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/trace"
)

// sweepDir saves the README's fork and the base itself as the variants of
// a sweep directory.
func sweepDir(t *testing.T) (base string, dir string) {
	t.Helper()
	dir = t.TempDir()
	base = "../../testdata/booking-agent.sftrace"
	_, err := fork.Trace(base, fork.ThroughStep(11),
		fork.Override(fork.OnStep(11), map[string]any{"booking_ref": "PNR-6E1158", "status": "confirmed"}),
		fork.SaveTo(filepath.Join(dir, "fixed.sftrace")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fork.Trace(base, fork.ThroughStep(4), fork.SaveTo(filepath.Join(dir, "early.sftrace"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a bundle"), 0o644); err != nil {
		t.Fatal(err)
	}
	return base, dir
}

func TestHandler(t *testing.T) {
	t.Parallel()
	base, dir := sweepDir(t)
	site, err := Open(base, dir)
	if err != nil {
		t.Fatal(err)
	}
	h := site.Handler()
	tests := []struct {
		method, path, host string
		code               int
		has                string
	}{
		{"GET", "/", "127.0.0.1:8080", 200, `<a href="/diff/fixed">fixed</a>`},
		{"GET", "/diff/fixed", "127.0.0.1:8080", 200, "first divergence"},
		{"GET", "/diff/early", "localhost:1", 200, "Base and variant"},
		{"GET", "/run/early", "[::1]:1", 200, "Fork run timeline"},
		{"GET", "/run/base", "127.0.0.1", 200, "Run timeline"},
		{"HEAD", "/", "127.0.0.1:8080", 200, ""},
		{"GET", "/diff/nope", "127.0.0.1:8080", 404, "Not Found"},
		{"GET", "/run/notes.txt", "127.0.0.1:8080", 404, "Not Found"},
		{"GET", "/events.jsonl", "127.0.0.1:8080", 404, "Not Found"},
		{"GET", "/run/", "127.0.0.1:8080", 404, "Not Found"},
		{"GET", "/run/fixed/manifest.json", "127.0.0.1:8080", 404, "Not Found"},
		{"GET", "/run/..%2f..%2fetc%2fpasswd", "127.0.0.1:8080", 400, "bad path"},
		{"GET", "/run/../../etc/passwd", "127.0.0.1:8080", 400, "bad path"},
		{"GET", "/run/fixed.sftrace%5c..%5cmanifest.json", "127.0.0.1:8080", 400, "bad path"},
		{"GET", "/", "evil.example:8080", 403, "loopback"},
		{"POST", "/", "127.0.0.1:8080", 405, "method not allowed"},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, "http://127.0.0.1"+tt.path, nil)
		req.Host = tt.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		res := rec.Result()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != tt.code {
			t.Errorf("%s %s (Host %s): %d, want %d", tt.method, tt.path, tt.host, res.StatusCode, tt.code)
			continue
		}
		if !strings.Contains(string(body), tt.has) {
			t.Errorf("%s %s: body lacks %q", tt.method, tt.path, tt.has)
		}
		ct := res.Header.Get("Content-Type")
		switch {
		case tt.code == 200 && ct != "text/html; charset=utf-8":
			t.Errorf("%s %s: Content-Type %q", tt.method, tt.path, ct)
		case tt.code != 200 && strings.HasPrefix(ct, "text/html"):
			t.Errorf("%s %s: an error served as HTML (%q)", tt.method, tt.path, ct)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: no nosniff", tt.method, tt.path)
		}
	}
}

func TestOpenRefusesWhatItCannotShow(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	for _, args := range [][]string{
		{empty},
		{"../../testdata/booking-agent.sftrace", empty},
		{"../../testdata/no-such.sftrace"},
		{"a", "b", "c"},
	} {
		if _, err := Open(args...); err == nil {
			t.Errorf("Open(%q) succeeded", args)
		}
	}
}

func TestServeStopsWithItsContext(t *testing.T) {
	t.Parallel()
	site, err := Open("../../testdata/booking-agent.sftrace")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- site.Serve(ctx, func(u string) { urls <- u }) }()
	u := <-urls
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Errorf("served at %s, not on the loopback address", u)
	}
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "run_booking_agent_0001") {
		t.Errorf("GET %s: %d", u, res.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not stop when its context was canceled")
	}
	if _, err := http.Get(u); err == nil {
		t.Error("the server still answers after it stopped")
	}
}

// A sweep directory viewed alone is compared with the base its variants'
// fork.json name (parent_trace_path), found where it was recorded or
// relative to a directory above the sweep: the test that saved it ran in
// its package's directory, the viewer may run anywhere.
func TestSweepDirFindsItsBase(t *testing.T) {
	t.Parallel()
	t.Run("recorded path", func(t *testing.T) {
		t.Parallel()
		_, dir := sweepDir(t)
		site, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		html := render(t, site.Page(false))
		if strings.Contains(html, "No base run") || !strings.Contains(html, "base <code>run_booking_agent_0001</code>") {
			t.Errorf("the sweep page does not show the base it found:\n%s", sweepSectionOf(html))
		}
	})
	t.Run("relative to a directory above", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		pkg := filepath.Join(root, "pkg")
		base, err := trace.Load("../../testdata/booking-agent.sftrace")
		if err != nil {
			t.Fatal(err)
		}
		if err := base.Save(filepath.Join(pkg, "testdata", "booking.sftrace")); err != nil {
			t.Fatal(err)
		}
		base.Path = "testdata/booking.sftrace" // as a test in pkg loads it
		out := filepath.Join(pkg, "testdata", "out")
		if _, err := fork.Trace(base, fork.ThroughStep(4), fork.SaveTo(filepath.Join(out, "early.sftrace"))); err != nil {
			t.Fatal(err)
		}
		site, err := Open(out)
		if err != nil {
			t.Fatal(err)
		}
		if site.base == nil {
			t.Fatalf("no base found: %s", site.baseNote)
		}
	})
	t.Run("not found", func(t *testing.T) {
		t.Parallel()
		base, err := trace.Load("../../testdata/booking-agent.sftrace")
		if err != nil {
			t.Fatal(err)
		}
		base.Path = "gone/booking.sftrace"
		dir := t.TempDir()
		if _, err := fork.Trace(base, fork.ThroughStep(4), fork.SaveTo(filepath.Join(dir, "early.sftrace"))); err != nil {
			t.Fatal(err)
		}
		site, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		html := render(t, site.Page(false))
		want := "No base run: the base run run_booking_agent_0001 (fork.json: parent_trace_path gone/booking.sftrace) was not found where it was recorded; give it: stepfork view BASE " + dir + "."
		if !strings.Contains(html, want) {
			t.Errorf("the page does not say why it has no base; want %q in:\n%s", want, sweepSectionOf(html))
		}
		if strings.Contains(sweepSectionOf(html), "<p class=\"sweep-facts\"> ·") {
			t.Error("a stray separator starts the sweep's facts")
		}
	})
}

// One packed bundle is a run, not a sweep directory.
func TestOpenPackedBundle(t *testing.T) {
	t.Parallel()
	packed := filepath.Join(t.TempDir(), "booking.sftrace.tar.gz")
	if err := trace.Pack("../../testdata/booking-agent.sftrace", packed); err != nil {
		t.Fatal(err)
	}
	site, err := Open(packed)
	if err != nil {
		t.Fatalf("Open(one packed bundle): %v", err)
	}
	if got := site.Describe(); got != "the run run_booking_agent_0001" {
		t.Errorf("Describe = %q", got)
	}
	// And a sweep directory may hold packed bundles.
	dir := t.TempDir()
	if err := trace.Pack("../../testdata/booking-agent.sftrace", filepath.Join(dir, "again.sftrace.tar.gz")); err != nil {
		t.Fatal(err)
	}
	vs, err := LoadDir(dir)
	if err != nil || len(vs) != 1 || vs[0].Name != "again" || vs[0].Err != nil {
		t.Errorf("LoadDir of a directory of a packed bundle: %+v, %v", vs, err)
	}
}

func sweepSectionOf(html string) string {
	i := strings.Index(html, `<section class="card sweep"`)
	if i < 0 {
		return html
	}
	j := strings.Index(html[i:], "</section>")
	return html[i : i+j]
}
