package view

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Loopback is the HTTP server of stepfork's pages (stepfork view, the
// explore page): a listener on 127.0.0.1 at a free port, and the limits
// every such server keeps, whatever it serves:
//
//   - Only requests in origin form ("GET /path") whose Host is the
//     server's own address (127.0.0.1:PORT or localhost:PORT) reach the
//     handler. A request line in absolute form ("GET http://127.0.0.1:PORT/")
//     is refused: Go takes its host from the request line and drops the
//     Host header, which then cannot be checked (DNS rebinding).
//   - Reading a request's headers, reading the request, writing the
//     response and keeping an idle connection open all have a timeout, so
//     a client that does not read or does not send holds nothing for long.
//   - At most maxConns connections are served at once; others wait to be
//     accepted.
type Loopback struct {
	ln     net.Listener
	origin string // http://127.0.0.1:PORT
	hosts  []string
	limits loopbackLimits
}

// loopbackLimits are the timeouts and the connection cap of a Loopback.
type loopbackLimits struct {
	readHeader, read, write, idle time.Duration
	maxConns                      int
}

// defaultLimits fit pages of a few tens of MB written over the loopback
// interface in milliseconds.
var defaultLimits = loopbackLimits{
	readHeader: 10 * time.Second,
	read:       30 * time.Second,
	write:      60 * time.Second,
	idle:       30 * time.Second,
	maxConns:   64,
}

// ListenLoopback listens on 127.0.0.1 at a free port.
func ListenLoopback() (*Loopback, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cannot listen on the loopback address: %w", err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	return &Loopback{ln: ln, origin: "http://" + addr, hosts: []string{addr, "localhost:" + port}, limits: defaultLimits}, nil
}

// Origin returns the server's origin, http://127.0.0.1:PORT.
func (l *Loopback) Origin() string { return l.origin }

// Addr returns the address the server listens on, 127.0.0.1:PORT.
func (l *Loopback) Addr() string { return l.ln.Addr().String() }

// Serve serves h until ctx is done, then shuts down: requests in flight
// get a few seconds to finish. It returns nil when ctx ended it.
func (l *Loopback) Serve(ctx context.Context, h http.Handler) error {
	srv := &http.Server{
		Handler:           l.guard(h),
		ReadHeaderTimeout: l.limits.readHeader,
		ReadTimeout:       l.limits.read,
		WriteTimeout:      l.limits.write,
		IdleTimeout:       l.limits.idle,
		MaxHeaderBytes:    64 << 10,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(limitListener(l.ln, l.limits.maxConns)) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		srv.Close()
	}
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// guard refuses what is not a request for this server (see Loopback).
func (l *Loopback) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.RequestURI, "/") || !l.ownHost(r.Host) {
			http.Error(w, "this server answers requests for its paths on its loopback address only", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ownHost reports whether host is the server's own address.
func (l *Loopback) ownHost(host string) bool {
	for _, h := range l.hosts {
		if strings.EqualFold(host, h) {
			return true
		}
	}
	return false
}

// limitListener accepts at most n connections at once; the others wait.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limited{Listener: ln, sem: make(chan struct{}, n)}
}

type limited struct {
	net.Listener
	sem chan struct{}
}

func (l *limited) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
