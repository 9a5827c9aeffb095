package view

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// startLoopback serves h with the given limits until the test ends.
func startLoopback(t *testing.T, h http.Handler, limits loopbackLimits) *Loopback {
	t.Helper()
	l, err := ListenLoopback()
	if err != nil {
		t.Fatal(err)
	}
	l.limits = limits
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l
}

// rawRequest sends text on a new connection and returns the status line
// of the answer.
func rawRequest(t *testing.T, addr, text string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, text); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", text, err)
	}
	return strings.TrimSpace(line)
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// TestLoopbackHost checks that only origin-form requests naming the
// server's own address reach the handler: an absolute-form request line
// takes its host from the line and drops the Host header, so it is refused
// whatever it names.
func TestLoopbackHost(t *testing.T) {
	t.Parallel()
	l := startLoopback(t, okHandler, defaultLimits)
	addr := l.Addr()
	_, port, _ := net.SplitHostPort(addr)
	cases := []struct{ req, want string }{
		{"GET / HTTP/1.1\r\nHost: " + addr + "\r\n\r\n", "200"},
		{"GET / HTTP/1.1\r\nHost: localhost:" + port + "\r\n\r\n", "200"},
		{"GET / HTTP/1.1\r\nHost: evil.com\r\n\r\n", "403"},
		{"GET / HTTP/1.1\r\nHost: evil.com:" + port + "\r\n\r\n", "403"},
		{"GET / HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", "403"},
		{"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "403"},
		{"GET http://" + addr + "/ HTTP/1.1\r\nHost: evil.com\r\n\r\n", "403"},
		{"GET http://evil.com/ HTTP/1.1\r\nHost: " + addr + "\r\n\r\n", "403"},
	}
	for _, tc := range cases {
		if got := rawRequest(t, addr, tc.req); !strings.Contains(got, " "+tc.want+" ") {
			t.Errorf("%q: %s, want %s", tc.req, got, tc.want)
		}
	}
}

// TestLoopbackTimeouts checks that an idle connection, a client that
// never finishes its request and a client that does not read are all let
// go of.
func TestLoopbackTimeouts(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 16<<20) // more than the socket buffers hold
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) })
	limits := loopbackLimits{readHeader: 200 * time.Millisecond, read: 300 * time.Millisecond,
		write: 500 * time.Millisecond, idle: 200 * time.Millisecond, maxConns: 8}
	l := startLoopback(t, h, limits)
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.Copy(io.Discard, c)
		return err == nil // EOF: the server closed it
	}
	t.Run("idle", func(t *testing.T) {
		c, err := net.Dial("tcp", l.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !closed(c) {
			t.Error("an idle connection was not closed")
		}
	})
	t.Run("unfinished request", func(t *testing.T) {
		c, err := net.Dial("tcp", l.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+l.Addr()+"\r\n") // no end of headers
		if !closed(c) {
			t.Error("a request that never ends was not cut off")
		}
	})
	t.Run("client that does not read", func(t *testing.T) {
		c, err := net.Dial("tcp", l.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+l.Addr()+"\r\n\r\n")
		time.Sleep(time.Second) // the write times out meanwhile
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _ := io.Copy(io.Discard, c)
		if n >= int64(len(big)) {
			t.Errorf("read %d bytes: the whole page was written to a client that did not read", n)
		}
	})
}

// TestLoopbackConnectionCap checks that at most maxConns connections are
// served at once, and that the others are served once one ends.
func TestLoopbackConnectionCap(t *testing.T) {
	t.Parallel()
	var active, most atomic.Int32
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := active.Add(1)
		defer active.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		io.WriteString(w, "ok")
	})
	limits := defaultLimits
	limits.maxConns = 3
	l := startLoopback(t, h, limits)
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 10 {
		wg.Go(func() {
			res, err := http.Get(l.Origin() + "/")
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				ok.Add(1)
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); active.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // more would be served meanwhile without the cap
	if got := active.Load(); got != 3 {
		t.Errorf("%d requests served at once, want 3", got)
	}
	close(release)
	wg.Wait()
	if most.Load() > 3 || ok.Load() != 10 {
		t.Errorf("at most %d served at once, %d answered; want at most 3 and 10", most.Load(), ok.Load())
	}
}

// TestPagesRenderedOnce checks that concurrent requests for a page get
// the same bytes from one rendering.
func TestPagesRenderedOnce(t *testing.T) {
	t.Parallel()
	s := &Site{kind: "run", variant: load(t, "booking-agent.sftrace")}
	l := startLoopback(t, s.Handler(), defaultLimits)
	var wg sync.WaitGroup
	bodies := make([]string, 20)
	for i := range bodies {
		wg.Go(func() {
			res, err := http.Get(l.Origin() + "/")
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			bodies[i] = string(b)
		})
	}
	wg.Wait()
	for i, b := range bodies {
		if b != bodies[0] || b == "" {
			t.Fatalf("answer %d differs from the first (%d and %d bytes)", i, len(b), len(bodies[0]))
		}
	}
	s.mu.Lock()
	n := len(s.pages)
	s.mu.Unlock()
	if n != 1 {
		t.Errorf("%d pages kept, want 1", n)
	}
	for i := range 50 { // paths of no page are not kept
		http.Get(fmt.Sprintf("%s/run/nothing-%d", l.Origin(), i))
	}
	s.mu.Lock()
	n = len(s.pages)
	s.mu.Unlock()
	if n != 1 {
		t.Errorf("%d pages kept after requests for pages that do not exist, want 1", n)
	}
}
