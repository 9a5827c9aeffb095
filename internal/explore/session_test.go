package explore

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// served is a session of a test: its address and a client.
type served struct {
	url  string
	tok  string
	stop func()
	done chan error
}

// serve starts a session of cfg; it ends with the test.
func serve(t *testing.T, cfg Config) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	sv := &served{done: make(chan error, 1)}
	go func() { sv.done <- Serve(ctx, cfg, func(u string) { urls <- u }) }()
	select {
	case sv.url = <-urls:
	case err := <-sv.done:
		t.Fatalf("Serve: %v", err)
	}
	sv.tok = strings.Split(strings.TrimPrefix(sv.url, "http://"), "/")[2]
	sv.stop = cancel
	t.Cleanup(func() {
		cancel()
		select {
		case <-sv.done:
		case <-time.After(20 * time.Second):
			t.Error("Serve did not return after its context was canceled")
		}
	})
	return sv
}

func (sv *served) get(t *testing.T, path string, into any) int {
	t.Helper()
	resp, err := http.Get(sv.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if s, ok := into.(*string); ok {
		*s = string(b)
	} else if into != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, b)
		}
	}
	return resp.StatusCode
}

func (sv *served) post(t *testing.T, path string, body any, into any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, sv.url+path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Stepfork-Token", sv.tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if into != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(out, into); err != nil {
			t.Fatalf("POST %s: %v\n%s", path, err, out)
		}
	}
	return resp.StatusCode, string(out)
}

// wait polls the session's runs until run id has finished.
func (sv *served) wait(t *testing.T, id int) runJSON {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var runs []runJSON
		sv.get(t, "api/runs", &runs)
		if id <= len(runs) && runs[id-1].State != "running" {
			return runs[id-1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("run %d did not finish", id)
	return runJSON{}
}

func TestSessionForksAndOffersCode(t *testing.T) {
	s := newShop()
	base := record(t, s)
	sv := serve(t, Config{Base: base, Agent: s.run, Test: "TestShop"})

	var points []point
	sv.get(t, "api/points", &points)
	failure := -1
	for _, p := range points {
		if p.Failure {
			failure = p.Step
		}
	}
	if failure < 0 {
		t.Fatalf("no point marked as the failure: %+v", points)
	}
	var c choices
	if st := sv.get(t, "api/choices?step="+itoa(failure), &c); st != http.StatusOK {
		t.Fatalf("choices: %d", st)
	}
	t.Logf("choices at %d: %s; %d outputs, %d prompts", failure, c.Code, len(c.Outputs), len(c.Prompts))
	if c.Code != "fork.Failure()" {
		t.Errorf("the failure point is written %s, want fork.Failure()", c.Code)
	}
	var run struct{ ID int }
	st, body := sv.post(t, "api/run", runRequest{Step: failure, Changes: []changeSpec{
		{Kind: "prompt", Target: "decide", Op: "replace", Passage: "Refund what the customer asks.", Text: "Refunds above the limit: escalate them."},
	}, Policy: policySpec{Allow: []string{"file_case"}}}, &run)
	if st != http.StatusAccepted {
		t.Fatalf("run: %d %s", st, body)
	}
	r := sv.wait(t, run.ID)
	if r.State != "done" || r.Status != "completed" {
		t.Fatalf("run %+v", r)
	}
	var cd code
	sv.get(t, "api/code/"+itoa(run.ID), &cd)
	t.Logf("code:\n%s\nno file: %s", cd.Snippet, cd.NoFile)
	var page string
	sv.get(t, "run/"+itoa(run.ID), &page)
	if !strings.Contains(page, "escalate") {
		t.Errorf("the run's page does not show the escalation")
	}
	_ = errors.New
}

func itoa(n int) string { return strconv.Itoa(n) }
