package view

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/stepfork/stepfork/trace"
)

// Site is what `stepfork view` shows for the paths it was given: one bundle
// (a run, or a fork), two bundles (a base and a variant), a directory a
// sweep was saved to, or a base bundle and such a directory.
type Site struct {
	kind     string // run, diff, sweep
	base     *trace.Trace
	variant  *trace.Trace
	variants []SweepVariant
	byName   map[string]*SweepVariant
	baseNote string // why a sweep has no base, when it has none

	mu    sync.Mutex
	pages map[string]*renderedPage // by path, rendered once
	kept  int                      // bytes of the pages kept
	clock int64
}

// Open reads the bundles named by paths for a Site. A path is a bundle (a
// directory holding manifest.json, or a packed NAME.sftrace.tar.gz) unless
// it is a directory without manifest.json: the directory a sweep was saved
// to (fork.SaveDir). A sweep directory given alone is compared with the base
// its variants' fork.json name (parent_trace_path), when that bundle can be
// read (see [FindBase]).
func Open(paths ...string) (*Site, error) {
	isBundle := func(p string) bool {
		if !isDir(p) {
			return true // a packed bundle, or a path Load explains
		}
		_, err := os.Stat(filepath.Join(p, trace.ManifestFile))
		return err == nil
	}
	load := func(p string) (*trace.Trace, error) {
		tr, err := trace.Load(p)
		if err != nil {
			return nil, err
		}
		return tr, nil
	}
	s := &Site{}
	switch {
	case len(paths) == 1 && isBundle(paths[0]):
		tr, err := load(paths[0])
		if err != nil {
			return nil, err
		}
		s.kind, s.variant = "run", tr
	case len(paths) == 1:
		vs, err := LoadDir(paths[0])
		if err != nil {
			return nil, err
		}
		s.kind, s.variants = "sweep", vs
		s.base, s.baseNote = FindBase(paths[0], vs)
	case len(paths) == 2:
		base, err := load(paths[0])
		if err != nil {
			return nil, err
		}
		s.base = base
		if isBundle(paths[1]) {
			v, err := load(paths[1])
			if err != nil {
				return nil, err
			}
			s.kind, s.variant = "diff", v
			break
		}
		vs, err := LoadDir(paths[1])
		if err != nil {
			return nil, err
		}
		s.kind, s.variants = "sweep", vs
	default:
		return nil, fmt.Errorf("view: want one or two paths (a bundle, a base and a variant, or a sweep directory with or without its base), got %d", len(paths))
	}
	s.byName = map[string]*SweepVariant{}
	for i := range s.variants {
		s.byName[s.variants[i].Name] = &s.variants[i]
	}
	return s, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// Describe says in a few words what the site shows.
func (s *Site) Describe() string {
	switch s.kind {
	case "run":
		if _, ok := s.variant.Extras["fork.json"]; ok {
			return "the fork " + s.variant.RunID
		}
		return "the run " + s.variant.RunID
	case "diff":
		return "the diff of " + s.base.RunID + " and " + s.variant.RunID
	}
	return fmt.Sprintf("a sweep of %d variant(s)", len(s.variants))
}

// Page is the site's main page. In a written file (links false) a sweep's
// rows open diffs within the page; served, they link to the site's pages.
func (s *Site) Page(links bool) *Page {
	switch s.kind {
	case "run":
		return RunPage(s.variant)
	case "diff":
		return DiffPage(s.base, s.variant)
	}
	var link func(string) string
	if links {
		link = func(name string) string {
			if s.base != nil {
				return "/diff/" + url.PathEscape(name)
			}
			return "/run/" + url.PathEscape(name)
		}
	}
	p := SweepPage(s.base, s.variants, link)
	if p.Sweep != nil && s.base == nil {
		p.Sweep.NoBase = s.baseNote
	}
	return p
}

// Handler serves the site: / is the main page, /run/NAME the run of a
// variant of a sweep (or /run/base and /run/variant of a diff), /diff/NAME
// a variant's diff against the base. Nothing else is served: every page is
// rendered from the bundles Open read, never from a path in the request,
// so there is no file to reach by traversal and no listing. Each page is
// rendered once, on its first request, and served from memory after
// that, to any number of clients. Requests with another Host than the
// loopback address are refused (DNS rebinding).
func (s *Site) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:")
		if !loopbackHost(r.Host) {
			http.Error(w, "stepfork view answers on the loopback address only", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		raw := r.URL.EscapedPath()
		if strings.Contains(raw, "..") || strings.Contains(raw, "\\") || strings.Contains(strings.ToLower(raw), "%2f") || strings.Contains(strings.ToLower(raw), "%5c") {
			http.Error(w, "bad path", http.StatusBadRequest)
			return
		}
		page, status, err := s.rendered(r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if page == nil {
			http.Error(w, http.StatusText(status), status)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(page)))
		if r.Method == http.MethodHead {
			return
		}
		w.Write(page)
	})
}

// rendered returns the page a path names, rendered on its first request
// and kept while the pages kept are within maxKeptPages bytes (the pages
// asked for least recently go first).
func (s *Site) rendered(path string) ([]byte, int, error) {
	if path == "/index.html" {
		path = "/"
	}
	s.mu.Lock()
	if s.pages == nil {
		s.pages = map[string]*renderedPage{}
	}
	rp := s.pages[path]
	if rp == nil {
		rp = &renderedPage{path: path}
		s.pages[path] = rp
	}
	s.clock++
	rp.used = s.clock
	s.mu.Unlock()
	rp.once.Do(func() {
		p, status := s.route(path)
		rp.status = status
		if p == nil {
			return
		}
		var buf bytes.Buffer
		if rp.err = p.Render(&buf); rp.err == nil {
			rp.page = buf.Bytes()
		}
	})
	s.keep(rp)
	return rp.page, rp.status, rp.err
}

// maxKeptPages bounds the bytes of the rendered pages a Site keeps.
const maxKeptPages = 128 << 20

// keep counts a page just rendered and lets go of the pages asked for
// least recently while the others are above maxKeptPages (a page being
// written to a client stays in memory until it is written).
func (s *Site) keep(rp *renderedPage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rp.page == nil {
		// Not found, or not rendered: nothing is kept for a path that
		// names no page, however many are asked for.
		if s.pages[rp.path] == rp {
			delete(s.pages, rp.path)
		}
		return
	}
	if rp.counted {
		return
	}
	rp.counted = true
	s.kept += len(rp.page)
	for s.kept > maxKeptPages {
		var old *renderedPage
		for _, p := range s.pages {
			if p != rp && p.counted && (old == nil || p.used < old.used) {
				old = p
			}
		}
		if old == nil {
			return
		}
		delete(s.pages, old.path)
		s.kept -= len(old.page)
	}
}

// renderedPage is a page of a Site rendered on its first request.
type renderedPage struct {
	path    string
	used    int64 // when it was last asked for (Site.clock)
	counted bool  // in Site.kept
	once    sync.Once
	page    []byte
	status  int
	err     error
}

// route finds the page a path names.
func (s *Site) route(path string) (*Page, int) {
	if path == "/" || path == "/index.html" {
		return s.Page(true), http.StatusOK
	}
	kind, name, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return nil, http.StatusNotFound
	}
	switch {
	case kind == "run" && s.kind == "diff" && name == "base":
		return RunPage(s.base), http.StatusOK
	case kind == "run" && s.kind == "diff" && name == "variant":
		return RunPage(s.variant), http.StatusOK
	case kind == "run" && s.kind == "sweep" && s.base != nil && name == "base":
		return RunPage(s.base), http.StatusOK
	}
	sv := s.byName[name]
	if sv == nil || sv.Trace == nil {
		return nil, http.StatusNotFound
	}
	switch {
	case kind == "run":
		return RunPage(sv.Trace), http.StatusOK
	case kind == "diff" && s.base != nil:
		return DiffPage(s.base, sv.Trace), http.StatusOK
	}
	return nil, http.StatusNotFound
}

// loopbackHost reports whether a request's Host names the loopback
// address.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Serve serves the site on 127.0.0.1 at a free port until ctx is done,
// with the limits of [Loopback]. ready is called with the page's URL once
// the server listens.
func (s *Site) Serve(ctx context.Context, ready func(url string)) error {
	l, err := ListenLoopback()
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	if ready != nil {
		ready(l.Origin() + "/")
	}
	return l.Serve(ctx, s.Handler())
}
