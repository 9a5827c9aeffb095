package explore

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// A secret the base run handles (a credential in a tool's output and in a
// model's prompt, a password under a sensitive key), a secret in a change,
// and a secret in an agent's error reach no answer of the session: no
// page, no list, no editor's prefill, no code, no test file.
func TestCanaryNowhere(t *testing.T) {
	s := newShop()
	base := record(t, s)
	dir := t.TempDir()
	site := siteFor(t, dir)
	sv := serve(t, Config{Base: base, Agent: s.run, Test: "TestShop", Dir: dir, Site: site})
	step := failureStep(t, sv)
	secretValue := `{"api_key": "` + canaryToken + `", "password": "` + canaryPassword + `"}`
	requests := []runRequest{
		{Step: step}, // fails again: its error names the key
		{Step: step, Changes: []changeSpec{
			{Kind: "prompt", Target: "decide", Op: "append", Text: " escalate; token " + canaryToken},
			{Kind: "param", Name: "secret", Value: secretValue},
			{Kind: "state", Set: map[string]string{"creds": secretValue}},
		}, Policy: policySpec{Allow: []string{"file_case"}}},
		{Step: step, Changes: []changeSpec{{Kind: "llm_response", Name: "fake/triage-1", Occurrence: 1, Value: `{"content": "escalate ` + canaryToken + `"}`}},
			Policy: policySpec{Allow: []string{"file_case"}, Memoize: true}},
		{Step: step, Changes: []changeSpec{{Kind: "human_response", Name: "confirm", Value: secretValue}, {Kind: "decision", Name: "action", Value: `"refund"`}}},
	}
	for _, req := range requests {
		var run struct{ ID int }
		if st, body := sv.post(t, "api/run", req, &run); st != http.StatusAccepted {
			t.Fatalf("run: %d %s", st, body)
		}
		r := sv.wait(t, run.ID)
		t.Logf("run %d: %s %s %s", r.ID, r.State, r.Status, r.Error)
	}
	paths := []string{"", "base", "api/points", "api/runs", "compare", "compare?ids=1,2", "pair/1/2", "pair/2/3"}
	var points []point
	sv.get(t, "api/points", &points)
	for _, p := range points {
		paths = append(paths, "api/choices?step="+strconv.Itoa(p.Step))
	}
	for id := 1; id <= len(requests); id++ {
		paths = append(paths, "run/"+strconv.Itoa(id), "api/code/"+strconv.Itoa(id))
	}
	seen := 0
	for _, p := range paths {
		var body string
		if st := sv.get(t, p, &body); st != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, st, body)
		}
		seen += strings.Count(body, "[REDACTED]")
		for _, c := range []string{canaryToken, canaryPassword, "EXPLORECANARY"} {
			if strings.Contains(body, c) {
				i := strings.Index(body, c)
				t.Errorf("GET %s shows the canary %q: …%s…", p, c, body[max(0, i-120):min(len(body), i+80)])
			}
		}
	}
	if seen == 0 {
		t.Error("no answer shows [REDACTED]: the canaries never reached the session, so the test checks nothing")
	}
	// The written test file and the saved bundle hold no secret either.
	var w struct{ Path string }
	if st, body := sv.post(t, "api/write/2", struct{}{}, &w); st != http.StatusOK {
		t.Fatalf("write: %d %s", st, body)
	}
	if st, body := sv.post(t, "api/save/2", struct{}{}, &w); st != http.StatusOK {
		t.Fatalf("save: %d %s", st, body)
	}
	assertNoCanaryUnder(t, dir)
}
