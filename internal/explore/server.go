package explore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stepfork/stepfork/internal/view"
	"github.com/stepfork/stepfork/trace"
)

// Serve serves an explore session of cfg.Base on 127.0.0.1 at a free port
// and returns when the person ends it from the page (nil) or when ctx is
// done (ctx's error). ready is called with the page's address, which
// holds the session's token, once the server listens. A fork still
// running is canceled, and waited for a few seconds, before Serve returns.
func Serve(ctx context.Context, cfg Config, ready func(url string)) error {
	s, err := newSession(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.stop()
	l, err := view.ListenLoopback() // the limits of every page server of stepfork
	if err != nil {
		return fmt.Errorf("explore: %w", err)
	}
	serving, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	done := make(chan error, 1)
	go func() { done <- l.Serve(serving, s.handler(l.Origin())) }()
	if ready != nil {
		ready(l.Origin() + s.prefix())
	}
	var result error
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		result = ctx.Err()
	case <-s.ended:
	}
	s.stop() // cancels the running fork
	waited := make(chan struct{})
	go func() { s.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second): // an agent that ignores its context
	}
	stopServing()
	if serr := <-done; serr != nil && result == nil {
		result = serr
	}
	return result
}

// maxBody is the largest request body read.
const maxBody = 8 << 20

func newToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("explore: no randomness for the session token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// prefix is the path every page of the session is under.
func (s *session) prefix() string { return "/s/" + s.token + "/" }

// handler serves the session behind the guard of view.Loopback (requests
// naming its own loopback address, in origin form). Every request must
// name the session's token in its path; a state change is a POST with the
// token in the X-Stepfork-Token header, a JSON body and no foreign Origin
// (origin is the server's, http://127.0.0.1:PORT). Everything else is
// refused before it reaches a page.
func (s *session) handler(origin string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Frame-Options", "SAMEORIGIN")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; connect-src 'self'; frame-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'none'")
		rest, ok := strings.CutPrefix(r.URL.Path, "/s/")
		tok, rest, _ := strings.Cut(rest, "/")
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) != 1 {
			http.Error(w, "forbidden: this address needs the session's token; use the address the test printed", http.StatusForbidden)
			return
		}
		if !strings.HasPrefix(r.URL.Path, s.prefix()) {
			http.Redirect(w, r, s.prefix(), http.StatusFound)
			return
		}
		route, post := routeOf(rest)
		switch {
		case route == "":
			http.Error(w, "not found", http.StatusNotFound)
			return
		case post && r.Method != http.MethodPost:
			h.Set("Allow", "POST")
			http.Error(w, "a state change is a POST", http.StatusMethodNotAllowed)
			return
		case !post && r.Method != http.MethodGet && r.Method != http.MethodHead:
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		case post:
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Stepfork-Token")), []byte(s.token)) != 1 {
				http.Error(w, "forbidden: a state change needs the session's token in X-Stepfork-Token", http.StatusForbidden)
				return
			}
			if o := r.Header.Get("Origin"); o != "" && !strings.EqualFold(o, origin) && !strings.EqualFold(o, "http://"+r.Host) {
				http.Error(w, "forbidden: a request from another origin", http.StatusForbidden)
				return
			}
			if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != "application/json" {
				http.Error(w, "a state change sends application/json", http.StatusUnsupportedMediaType)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		s.serve(w, r, route, rest)
	})
}

// routeOf names the route of a path below the session's prefix, and says
// whether it changes state (POST only). "" is no route.
func routeOf(rest string) (route string, post bool) {
	head, _, _ := strings.Cut(rest, "/")
	switch {
	case rest == "":
		return "shell", false
	case rest == "base", rest == "compare", head == "run" || head == "pair":
		return head, false
	case rest == "api/points", rest == "api/choices", rest == "api/runs", strings.HasPrefix(rest, "api/code/"):
		return rest, false
	case rest == "api/run", rest == "api/cancel", rest == "api/end", strings.HasPrefix(rest, "api/save/"), strings.HasPrefix(rest, "api/write/"):
		return rest, true
	}
	return "", false
}

// serve answers one checked request.
func (s *session) serve(w http.ResponseWriter, r *http.Request, route, rest string) {
	idArg := func(i int) (int, bool) {
		parts := strings.Split(rest, "/")
		if i >= len(parts) {
			return 0, false
		}
		n, err := strconv.Atoi(parts[i])
		return n, err == nil
	}
	switch {
	case route == "shell":
		s.serveShell(w, r)
	case route == "base":
		servePage(w, r, view.RunPage(s.cfg.Base))
	case route == "run":
		id, ok := idArg(1)
		run, err := s.finished(id)
		if !ok || err != nil {
			http.Error(w, errText(err, "no such run"), http.StatusNotFound)
			return
		}
		servePage(w, r, view.VariantPage(run.V))
	case route == "pair":
		a, okA := idArg(1)
		b, okB := idArg(2)
		ra, errA := s.finished(a)
		rb, errB := s.finished(b)
		if !okA || !okB || errA != nil || errB != nil {
			http.Error(w, errText(errors.Join(errA, errB), "no such runs"), http.StatusNotFound)
			return
		}
		p := view.DiffPage(ra.V.Trace, rb.V.Trace)
		p.Title = fmt.Sprintf("run %d → run %d", a, b)
		servePage(w, r, p)
	case route == "compare":
		s.serveCompare(w, r)
	case route == "api/points":
		writeJSON(w, http.StatusOK, s.listPoints())
	case route == "api/choices":
		step, err := strconv.Atoi(r.URL.Query().Get("step"))
		if err != nil {
			writeError(w, http.StatusBadRequest, errors.New("step=N names the fork point"))
			return
		}
		c, err := s.choicesAt(step)
		if err != nil {
			writeError(w, http.StatusNotFound, err)
			return
		}
		writeJSON(w, http.StatusOK, c)
	case route == "api/runs":
		writeJSON(w, http.StatusOK, s.listRuns())
	case strings.HasPrefix(route, "api/code/"):
		id, _ := idArg(2)
		c, err := s.codeOf(id)
		if err != nil {
			writeError(w, http.StatusNotFound, err)
			return
		}
		writeJSON(w, http.StatusOK, c)
	case route == "api/run":
		var req runRequest
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("the fork request is not understood: %v", err))
			return
		}
		run, err := s.start(req)
		switch {
		case errors.Is(err, errBusy):
			writeError(w, http.StatusConflict, err)
		case err != nil:
			writeError(w, http.StatusUnprocessableEntity, err)
		default:
			writeJSON(w, http.StatusAccepted, map[string]int{"id": run.ID})
		}
	case route == "api/cancel":
		writeJSON(w, http.StatusOK, map[string]bool{"canceled": s.cancelRunning()})
	case route == "api/end":
		writeJSON(w, http.StatusOK, map[string]bool{"ended": true})
		s.end()
	case strings.HasPrefix(route, "api/save/"):
		id, _ := idArg(2)
		p, err := s.save(id)
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"path": p})
	case strings.HasPrefix(route, "api/write/"):
		id, _ := idArg(2)
		p, err := s.writeTest(id)
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"path": p})
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

func errText(err error, def string) string {
	if err == nil {
		return def
	}
	s, _ := trace.RedactString(err.Error())
	return s
}

// serveCompare is the session's runs side by side, as a sweep: ids=1,2
// picks some; every finished run otherwise. Each row opens its run.
func (s *session) serveCompare(w http.ResponseWriter, r *http.Request) {
	var ids []int
	for f := range strings.SplitSeq(r.URL.Query().Get("ids"), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			ids = append(ids, n)
		}
	}
	if len(ids) == 0 {
		for _, j := range s.listRuns() {
			ids = append(ids, j.ID)
		}
	}
	var vs []view.SweepVariant
	byName := map[string]int{}
	for _, id := range ids {
		run, err := s.finished(id)
		if err != nil {
			continue
		}
		name := fmt.Sprintf("run %d", id)
		byName[name] = id
		vs = append(vs, view.SweepVariant{Name: name, Variant: run.V, Trace: run.V.Trace})
	}
	if len(vs) == 0 {
		http.Error(w, "no finished run to compare", http.StatusNotFound)
		return
	}
	p := view.SweepPage(s.cfg.Base, vs, func(name string) string { return "run/" + strconv.Itoa(byName[name]) })
	p.Title = fmt.Sprintf("explore · %d run(s) compared", len(vs))
	servePage(w, r, p)
}

// servePage renders a page of package view.
func servePage(w http.ResponseWriter, r *http.Request, p *view.Page) {
	var buf bytes.Buffer
	if err := p.Render(&buf); err != nil {
		http.Error(w, errText(err, "the page cannot be rendered"), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(buf.Bytes())
}

// writeJSON writes v, redacted (view.Redact), as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer {
		p := reflect.New(rv.Type())
		p.Elem().Set(rv)
		rv = p
	}
	view.Redact(rv.Interface())
	b, err := json.Marshal(rv.Interface())
	if err != nil {
		http.Error(w, errText(err, "cannot encode the answer"), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// ---- the page ----

//go:embed assets/explore.html assets/explore.css assets/explore.js
var assets embed.FS

// shell is the page's template, parsed when a session first serves it.
var shell = sync.OnceValues(func() (*template.Template, error) {
	return template.ParseFS(assets, "assets/explore.html")
})

type shellData struct {
	Title    string
	Test     string
	Base     string
	Status   string
	Deadline string
	CSS      template.CSS
	JS       template.JS
}

func (s *session) serveShell(w http.ResponseWriter, r *http.Request) {
	t, err := shell()
	if err != nil {
		http.Error(w, errText(err, "the page cannot be rendered"), http.StatusInternalServerError)
		return
	}
	css, _ := assets.ReadFile("assets/explore.css")
	js, _ := assets.ReadFile("assets/explore.js")
	base := s.cfg.Base.Path
	if base == "" {
		base = "an in-memory run of " + strconv.Quote(s.cfg.Base.AgentName)
	}
	d := &shellData{Title: "explore " + s.cfg.Test, Test: s.cfg.Test, Base: base, Status: string(s.cfg.Base.Status),
		CSS: view.Stylesheet() + template.CSS(css), JS: template.JS(js)}
	strs := []*string{&d.Title, &d.Test, &d.Base}
	for _, p := range strs {
		*p, _ = trace.RedactString(*p)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, d); err != nil {
		http.Error(w, errText(err, "the page cannot be rendered"), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if r.Method == http.MethodHead {
		return
	}
	io.Copy(w, &buf)
}
