package browsertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/stepfork/stepfork/internal/explore"
	"github.com/stepfork/stepfork/internal/view/viewtest"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// The explore page (go test -stepfork.explore, package internal/explore):
// here served in this process on a run that handles secrets, and, in
// explore_refund_test.go, by the refund example's own test.

// leaky is an agent that handles a credential and a password: it calls an
// API with them and puts the credential in its model's prompt. slow makes
// its model wait until it is canceled.
type leaky struct {
	slow  atomic.Bool
	calls atomic.Int64
	run   replay.Agent
}

const password = "hunter2-hunter2"

func newLeaky() *leaky {
	l := &leaky{}
	callAPI := replay.Tool("call_api", func(_ context.Context, in map[string]any) (map[string]any, error) {
		return map[string]any{"status": 200, "session_token": viewtest.Secret}, nil
	})
	model := func(ctx context.Context, req replay.Request) (replay.Response, error) {
		l.calls.Add(1)
		if l.slow.Load() {
			<-ctx.Done()
			return replay.Response{}, ctx.Err()
		}
		return replay.Response{Content: "done with " + viewtest.Secret}, nil
	}
	l.run = replay.Typed(func(ctx context.Context, in struct {
		User string `json:"user"`
	}) (map[string]any, error) {
		out, err := callAPI(ctx, map[string]any{"url": "https://api.example.com/v1/orders", "authorization_header": "Bearer " + viewtest.Secret, "password": password})
		if err != nil {
			return nil, err
		}
		resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "m-1", System: "Use the key " + viewtest.Secret + " and the password " + password + ".",
			Messages: []replay.Message{{Role: "user", Content: fmt.Sprint(out["status"])}}}, model)
		return map[string]any{"reply": resp.Content, "token": out["session_token"]}, err
	})
	return l
}

// leakyBase is a run of the leaky agent as an unredacted recording would
// hold it in memory: the secrets in its payloads.
func leakyBase() *trace.Trace {
	b := trace.NewBuilder("leaky-agent")
	b.RunStart(map[string]any{"user": "dana"})
	b.Tool("call_api", map[string]any{"url": "https://api.example.com/v1/orders", "authorization_header": "Bearer " + viewtest.Secret, "password": password},
		map[string]any{"status": 200, "session_token": viewtest.Secret})
	b.LLM("fake", "m-1", map[string]any{"system": "Use the key " + viewtest.Secret + " and the password " + password + ".", "messages": []any{map[string]any{"role": "user", "content": "200"}}},
		map[string]any{"content": "done with " + viewtest.Secret})
	b.RunEnd(trace.RunCompleted, map[string]any{"reply": "done with " + viewtest.Secret, "token": viewtest.Secret, "password": password})
	return b.MustTrace()
}

// serveExplore serves a session in this process until the test ends.
func serveExplore(t *testing.T, cfg explore.Config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- explore.Serve(ctx, cfg, func(u string) { urls <- u }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("the session did not end")
		}
	})
	select {
	case u := <-urls:
		return u
	case err := <-done:
		t.Fatalf("explore.Serve: %v", err)
	}
	return ""
}

// openExplore opens the explore page and waits for its fork points.
func (tb *tab) openExplore(t *testing.T, url string) {
	t.Helper()
	tb.do(t, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("html.sf-ready")))
}

// wait waits until a JavaScript expression is truthy.
func (tb *tab) wait(t *testing.T, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}

// frameText is the rendered text of the page at path (below the
// session's address) in an iframe, once its script has run.
func (tb *tab) frameText(t *testing.T, id, path string) string {
	t.Helper()
	tb.wait(t, fmt.Sprintf(`(() => { const f = document.getElementById(%q); const d = f && f.contentDocument; return !!(d && d.documentElement && d.body && d.documentElement.classList.contains('sf-complete') && d.location.href.endsWith(%q)); })()`, id, "/"+path))
	return eval[string](t, tb, fmt.Sprintf(`document.getElementById(%q).contentDocument.body.innerText`, id))
}

// everything is what the page holds and shows: the markup and rendered
// text of the page and of every page in its frames, and the values of its
// editors (which the markup does not hold).
func (tb *tab) everything(t *testing.T) string {
	t.Helper()
	return eval[string](t, tb, `(() => {
		const docs = [document, ...[...document.querySelectorAll('iframe')].map(f => f.contentDocument).filter(d => d)];
		return docs.map(d => d.documentElement.outerHTML + '\n' + d.body.innerText + '\n' +
			[...d.querySelectorAll('textarea, input')].map(e => e.value).join('\n')).join('\n');
	})()`)
}

// clipShot writes the page from its top to the bottom of the element sel
// as NAME.png into the test's artifact directory (the README's screenshot
// is one of these).
func (tb *tab) clipShot(t *testing.T, name, sel string) {
	t.Helper()
	bottom := eval[float64](t, tb, fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect(); return r.bottom + window.scrollY + 8; })()`, sel))
	png, err := chromedp.Run(tb.ctx, chromedp.Action[[]byte](func(ctx context.Context, tg *chromedp.Target) ([]byte, error) {
		r, err := cdp.Call(ctx, tg, page.CaptureScreenshot, page.CaptureScreenshotParams{
			CaptureBeyondViewport: ptrTo(true), FromSurface: ptrTo(true), Format: page.CaptureScreenshotFormatPng,
			Clip: &page.Viewport{X: 0, Y: 0, Width: 1280, Height: bottom, Scale: 1},
		})
		if err != nil {
			return nil, err
		}
		return r.Data, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

func ptrTo[T any](v T) *T { return &v }

// runsRow is the text of the session list's row of run id.
func (tb *tab) runsRow(t *testing.T, id int) string {
	t.Helper()
	return eval[string](t, tb, fmt.Sprintf(`(document.querySelector('#runs tr[data-id="%d"]') || {innerText: ''}).innerText`, id))
}

// TestExploreSecretsAndCancel: a base whose payloads hold a credential and a
// password, shown, edited, forked and written as code, never shows either;
// a slow agent is canceled from the page, and the session goes on.
func TestExploreSecretsAndCancel(t *testing.T) {
	l := newLeaky()
	url := serveExplore(t, explore.Config{Base: leakyBase(), Agent: l.run, Test: "TestLeaky"})
	tb := newTab(t)
	tb.openExplore(t, url)
	tb.do(t, chromedp.Click(chromedp.CSS(`#base-details summary`)))
	if base := tb.frameText(t, "base-frame", "base"); !strings.Contains(base, "call_api") {
		t.Errorf("the base run's page reads:\n%s", base)
	}
	// The first point: the call is in the tail, its result prefilled.
	tb.do(t, chromedp.Click(chromedp.CSS(`#points li.point`)))
	tb.wait(t, `document.querySelectorAll('#choices .choice[data-kind="tool_result"]').length === 1`)
	editor := eval[string](t, tb, `document.querySelector('.choice[data-kind="tool_result"] textarea').value`)
	if !strings.Contains(editor, `"session_token": "[REDACTED]"`) {
		t.Errorf("the tool result's editor holds:\n%s", editor)
	}
	prompt := eval[string](t, tb, `document.querySelector('.choice[data-kind="prompt"] textarea.prompt-text').value`)
	if prompt != "Use the key [REDACTED] and the password hunter2-hunter2." && prompt != "Use the key [REDACTED] and the password [REDACTED]." {
		t.Errorf("the prompt's editor holds %q", prompt)
	}
	// Substitute the call's result (the guard would hold the live call back)
	// and run.
	tb.do(t, chromedp.Click(chromedp.CSS(`.choice[data-kind="tool_result"] input.toggle`)), chromedp.Click(chromedp.CSS(`#run-btn`)))
	tb.wait(t, `document.querySelector('#runs tr[data-id="1"]') && !document.querySelector('#runs tr[data-id="1"]').innerText.includes('running')`)
	if row := tb.runsRow(t, 1); !strings.Contains(row, "completed") {
		t.Errorf("run 1 reads %q", row)
	}
	tb.frameText(t, "run-frame", "run/1")
	tb.wait(t, `document.getElementById('code-snippet').textContent.includes('sftest.Fork')`)
	code := tb.text(t, "#code-snippet")
	if !strings.Contains(code, "[REDACTED]") {
		t.Errorf("the code shows no redacted value, so it shows the secrets or nothing at all:\n%s", code)
	}
	all := tb.everything(t)
	for _, secret := range []string{viewtest.Secret, "VIEWTESTSECRET"} {
		if strings.Contains(all, secret) {
			i := strings.Index(all, secret)
			t.Errorf("the page holds %q: …%s…", secret, all[max(0, i-100):min(len(all), i+60)])
		}
	}
	if strings.Count(all, "[REDACTED]") < 5 {
		t.Errorf("the page shows [REDACTED] %d time(s): the secrets did not reach it, so this test checks nothing", strings.Count(all, "[REDACTED]"))
	}
	// The password is under a sensitive key in the payloads: redacted
	// there. (In the prompt it is plain text, which only credential
	// patterns redact.)
	if strings.Contains(editor, password) {
		t.Error("the editor shows the password")
	}

	// A slow model: the fork runs until it is canceled from the page.
	l.slow.Store(true)
	before := l.calls.Load()
	tb.do(t, chromedp.Click(chromedp.CSS(`#run-btn`)))
	tb.wait(t, `document.querySelector('#runs tr[data-id="2"]') && document.querySelector('#runs tr[data-id="2"]').innerText.includes('running')`)
	for l.calls.Load() == before {
		time.Sleep(5 * time.Millisecond)
	}
	if !eval[bool](t, tb, `document.getElementById('run-btn').disabled`) {
		t.Error("Run is enabled while a fork runs")
	}
	tb.do(t, chromedp.Click(chromedp.CSS(`#cancel-btn`)))
	tb.wait(t, `!document.querySelector('#runs tr[data-id="2"]').innerText.includes('running')`)
	if row := tb.runsRow(t, 2); !strings.Contains(row, "canceled") {
		t.Errorf("the canceled run reads %q", row)
	}
	if msg := tb.text(t, "#run-msg"); !strings.Contains(msg, "run 2: canceled") {
		t.Errorf("the message after the cancel reads %q", msg)
	}
	// The session goes on.
	l.slow.Store(false)
	tb.do(t, chromedp.Click(chromedp.CSS(`#run-btn`)))
	tb.wait(t, `document.querySelector('#runs tr[data-id="3"]') && document.querySelector('#runs tr[data-id="3"]').innerText.includes('completed')`)
	tb.screenshot(t, "explore-cancel")
}
