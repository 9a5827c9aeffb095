package explore

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Every request must carry the token and the loopback Host; state changes
// are POSTs with the token in a header, a JSON body and no foreign Origin.
func TestServerRefuses(t *testing.T) {
	s := newShop()
	sv := serve(t, Config{Base: record(t, s), Agent: s.run, Test: "TestShop"})
	root := strings.TrimSuffix(sv.url, "/s/"+sv.tok+"/")
	host := strings.TrimPrefix(root, "http://")
	tests := []struct {
		name    string
		method  string
		path    string
		header  map[string]string
		body    string
		want    int
		started bool // the request would start a fork if it were let through
	}{
		{name: "no token", method: "GET", path: "/", want: 403},
		{name: "no token, api", method: "GET", path: "/api/points", want: 403},
		{name: "wrong token", method: "GET", path: "/s/" + strings.Repeat("0", len(sv.tok)) + "/api/points", want: 403},
		{name: "token prefix", method: "GET", path: "/s/" + sv.tok[:10] + "/api/points", want: 403},
		{name: "page", method: "GET", path: "/s/" + sv.tok + "/", want: 200},
		{name: "points", method: "GET", path: "/s/" + sv.tok + "/api/points", want: 200},
		{name: "another Host", method: "GET", path: "/s/" + sv.tok + "/api/points", header: map[string]string{"Host": "evil.example:80"}, want: 403},
		{name: "another port", method: "GET", path: "/s/" + sv.tok + "/api/points", header: map[string]string{"Host": "127.0.0.1:1"}, want: 403},
		{name: "localhost", method: "GET", path: "/s/" + sv.tok + "/api/points", header: map[string]string{"Host": "localhost:" + strings.Split(host, ":")[1]}, want: 200},
		{name: "GET of a state change", method: "GET", path: "/s/" + sv.tok + "/api/end", want: 405},
		{name: "GET of a fork", method: "GET", path: "/s/" + sv.tok + "/api/run", want: 405},
		{name: "POST without the header", method: "POST", path: "/s/" + sv.tok + "/api/end", header: map[string]string{"Content-Type": "application/json"}, body: "{}", want: 403},
		{name: "POST as a form", method: "POST", path: "/s/" + sv.tok + "/api/run", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Stepfork-Token": sv.tok}, body: "step=1", want: 415},
		{name: "POST from another origin", method: "POST", path: "/s/" + sv.tok + "/api/end", header: map[string]string{"Content-Type": "application/json", "X-Stepfork-Token": sv.tok, "Origin": "http://evil.example"}, body: "{}", want: 403},
		{name: "POST of a page", method: "POST", path: "/s/" + sv.tok + "/api/points", header: map[string]string{"Content-Type": "application/json", "X-Stepfork-Token": sv.tok}, body: "{}", want: 405},
		{name: "unknown route", method: "GET", path: "/s/" + sv.tok + "/etc/passwd", want: 404},
		{name: "traversal", method: "GET", path: "/s/" + sv.tok + "/../../etc/passwd", want: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, root+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				if k == "Host" {
					req.Host = v
					continue
				}
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s: %d, want %d", tt.method, tt.path, resp.StatusCode, tt.want)
			}
		})
	}
	// A request line in absolute form is refused, naming another host or
	// this one (Go takes the host from the line, so the Host header could
	// not be checked).
	for _, target := range []string{"http://evil.example", root} {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s/s/%s/api/points HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, sv.tok, host)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		conn.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("absolute-form request to %s: %d, want 403", target, resp.StatusCode)
		}
	}
	// Nothing above ran a fork or ended the session.
	var runs []runJSON
	sv.get(t, "api/runs", &runs)
	if len(runs) != 0 || s.modelCalls.Load() != 0 {
		t.Errorf("refused requests ran %d fork(s), %d model call(s)", len(runs), s.modelCalls.Load())
	}
	select {
	case err := <-sv.done:
		t.Fatalf("a refused request ended the session: %v", err)
	case <-time.After(10 * time.Millisecond):
	}
}

// A slow agent is canceled from the page; one fork runs at a time; the
// session stays usable.
func TestCancelAndOneAtATime(t *testing.T) {
	s := newShop()
	base := record(t, s)
	sv := serve(t, Config{Base: base, Agent: s.run, Test: "TestShop"})
	step := failureStep(t, sv)
	s.slow.Store(true)
	var run struct{ ID int }
	req := runRequest{Step: step, Changes: []changeSpec{{Kind: "prompt", Target: "decide", Op: "append", Text: " Think."}}}
	if st, body := sv.post(t, "api/run", req, &run); st != http.StatusAccepted {
		t.Fatalf("run: %d %s", st, body)
	}
	for s.modelCalls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if st, body := sv.post(t, "api/run", req, nil); st != http.StatusConflict || !strings.Contains(body, "a fork is running") {
		t.Errorf("a second fork while one runs: %d %s", st, body)
	}
	var c struct{ Canceled bool }
	sv.post(t, "api/cancel", struct{}{}, &c)
	if !c.Canceled {
		t.Error("cancel found no fork running")
	}
	r := sv.wait(t, run.ID)
	if r.State != "canceled" || r.Status != "canceled" {
		t.Errorf("the canceled run: state %s, status %s, error %s", r.State, r.Status, r.Error)
	}
	s.slow.Store(false)
	if st, body := sv.post(t, "api/run", req, &run); st != http.StatusAccepted {
		t.Fatalf("a fork after the cancel: %d %s", st, body)
	}
	if r := sv.wait(t, run.ID); r.State != "done" {
		t.Errorf("the fork after the cancel: %+v", r)
	}
}

// A request that cannot run is refused with fork's own message, before
// anything runs.
func TestRefusedFork(t *testing.T) {
	s := newShop()
	sv := serve(t, Config{Base: record(t, s), Agent: s.run, Test: "TestShop"})
	step := failureStep(t, sv)
	tests := []struct {
		name string
		req  runRequest
		want string
	}{
		{"not a point", runRequest{Step: 9999}, "step 9999 is not a fork point"},
		{"bad JSON", runRequest{Step: step, Changes: []changeSpec{{Kind: "decision", Name: "action", Value: "{nope"}}}, "not valid JSON"},
		{"unknown model", runRequest{Step: step, Changes: []changeSpec{{Kind: "model", Target: "nowhere", Model: "m"}}}, "no node or model 'nowhere' in the base run"},
		{"conflict", runRequest{Step: step, Changes: []changeSpec{{Kind: "param", Name: "p", Value: "1"}, {Kind: "param", Name: "p", Value: "2"}}}, "both write param:p"},
		{"prefix", runRequest{Step: step, Changes: []changeSpec{{Kind: "tool_result", Name: "lookup_order", Occurrence: 1, Value: "{}"}}}, "is in the served prefix"},
		{"policy", runRequest{Step: step, Policy: policySpec{Block: true, Allow: []string{"pay"}}}, "not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, body := sv.post(t, "api/run", tt.req, nil)
			if st != http.StatusUnprocessableEntity || !strings.Contains(body, tt.want) {
				t.Errorf("%d %s, want 422 with %q", st, body, tt.want)
			}
		})
	}
	var runs []runJSON
	sv.get(t, "api/runs", &runs)
	if len(runs) != 0 || s.modelCalls.Load() != 0 {
		t.Errorf("refused requests ran %d fork(s)", len(runs))
	}
}

func failureStep(t *testing.T, sv *served) int {
	t.Helper()
	var points []point
	sv.get(t, "api/points", &points)
	for _, p := range points {
		if p.Failure {
			return p.Step
		}
	}
	t.Fatal("no failure point")
	return 0
}
