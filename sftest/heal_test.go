package sftest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/corpus"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

// The triage agent of the tests of recordings that survive change: a
// ticket is summarized by a model, the customer and the orders are looked
// up by two tools on goroutines, a model decides (under a prompt the tests
// edit), the decision is carried out by a tool, and a model writes the
// reply. The model is an OpenAI-compatible fake reached through
// replay.Transport, which mints fresh response ids and request ids on every
// call, answers after a random delay, and whose decision depends on the
// prompt: under the edited prompt it escalates tickets above 50.

const (
	oldDecidePrompt = "Decide: refund or escalate."
	newDecidePrompt = "Decide: refund or escalate. Escalate refunds above 50."
	fakeModel       = "fake-4o"
	healTickets     = 30
	escalatedAbove  = 50
)

// triageTicket is the input of the triage agent.
type triageTicket struct {
	ID     string `json:"id"`
	Text   string `json:"text"`
	Amount int    `json:"amount"`
}

// chatModel is the fake provider: an httptest server speaking OpenAI chat
// completions.
type chatModel struct {
	srv      *httptest.Server
	mu       sync.Mutex
	byTicket map[string]int // live requests per ticket id
	calls    atomic.Int64
}

var ticketID = regexp.MustCompile(`\bt_\d+\b`)

func newChatModel(t testing.TB) *chatModel {
	m := &chatModel{byTicket: map[string]int{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *chatModel) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) < 2 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	system, user := req.Messages[0].Content, req.Messages[1].Content
	m.calls.Add(1)
	m.mu.Lock()
	m.byTicket[ticketID.FindString(user)]++
	m.mu.Unlock()
	var answer string
	switch {
	case strings.HasPrefix(system, "Summarize"):
		answer = "summary of " + user
	case strings.HasPrefix(system, "Decide"):
		answer = "refund"
		amount, _ := strconv.Atoi(regexp.MustCompile(`amount (\d+)`).FindStringSubmatch(user + " amount 0")[1])
		if strings.Contains(system, "Escalate refunds above 50") && amount > escalatedAbove {
			answer = "escalate"
		}
	default:
		answer = "Dear customer, " + user
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-request-id", "req_"+uuid.NewString())
	fmt.Fprintf(w, `{"id":"chatcmpl-%s","object":"chat.completion","created":%d,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		uuid.NewString(), time.Now().Unix(), req.Model, answer, 40+len(user)/4, 10, 50+len(user)/4)
}

// live is how many live model calls the ticket's run made.
func (m *chatModel) live(ticket string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byTicket[ticket]
}

func (m *chatModel) reset() {
	m.mu.Lock()
	m.byTicket = map[string]int{}
	m.mu.Unlock()
	m.calls.Store(0)
}

// triageWorld counts the tools that really ran.
type triageWorld struct {
	refunds, escalations, lookups atomic.Int64
}

// triageAgent is the triage agent with the given decide prompt, its model
// reached through replay.Transport with a price for the fake model.
func triageAgent(m *chatModel, world *triageWorld, decidePrompt string, clock func() string) replay.Agent {
	client := &http.Client{Transport: replay.Transport(http.DefaultTransport, replay.Prices{fakeModel: {Input: 2, Output: 8}})}
	chat := func(ctx context.Context, system, user string) (string, error) {
		body, _ := json.Marshal(map[string]any{"model": fakeModel, "messages": []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": user}}})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.srv.URL+"/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer sk-test-"+strings.Repeat("k", 24))
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var out struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) == 0 {
			return "", fmt.Errorf("the model answered %s: %v", resp.Status, err)
		}
		return out.Choices[0].Message.Content, nil
	}
	jitter := func() { time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond) }
	customer := replay.Tool("customer", func(_ context.Context, id string) (map[string]any, error) {
		jitter()
		world.lookups.Add(1)
		return map[string]any{"id": id, "tier": "gold"}, nil
	})
	orders := replay.Tool("orders", func(_ context.Context, id string) ([]string, error) {
		jitter()
		world.lookups.Add(1)
		return []string{"ord_" + id}, nil
	})
	refund := replay.Tool("refund", func(_ context.Context, in triageTicket) (string, error) {
		world.refunds.Add(1)
		return "rf_" + uuid.NewString()[:8], nil
	})
	escalate := replay.Tool("escalate", func(_ context.Context, in triageTicket) (string, error) {
		world.escalations.Add(1)
		return "esc_" + uuid.NewString()[:8], nil
	})
	return replay.Typed(func(ctx context.Context, in triageTicket) (map[string]string, error) {
		summary, err := chat(ctx, "Summarize the ticket.", in.ID+": "+in.Text)
		if err != nil {
			return nil, err
		}
		var (
			wg     sync.WaitGroup
			cust   map[string]any
			ords   []string
			e1, e2 error
		)
		wg.Go(func() { cust, e1 = customer(ctx, in.ID) })
		wg.Go(func() { ords, e2 = orders(ctx, in.ID) })
		wg.Wait()
		if err := errors.Join(e1, e2); err != nil {
			return nil, err
		}
		system := decidePrompt
		if clock != nil {
			system += " Now: " + clock() + "."
		}
		var decision string
		err = replay.Node(ctx, "decide", func(ctx context.Context) error {
			var err error
			decision, err = chat(ctx, system, fmt.Sprintf("ticket %s, tier %v, %d order(s), amount %d", in.ID, cust["tier"], len(ords), in.Amount))
			return err
		})
		if err != nil {
			return nil, err
		}
		var ref string
		switch decision {
		case "escalate":
			ref, err = escalate(ctx, in)
		default:
			ref, err = refund(ctx, in)
		}
		if err != nil {
			return nil, err
		}
		reply, err := chat(ctx, "Write the reply.", fmt.Sprintf("%s: %s (%s)", in.ID, decision, strings.TrimPrefix(summary, "summary of ")))
		if err != nil {
			return nil, err
		}
		return map[string]string{"decision": decision, "ref_kind": strings.SplitN(ref, "_", 2)[0], "reply": reply}, nil
	})
}

// healTicket is ticket i of the corpus: the first ten are above the
// escalation threshold.
func healTicket(i int) triageTicket {
	amount := 5 + i
	if i < 10 {
		amount = escalatedAbove + 10 + i
	}
	return triageTicket{ID: fmt.Sprintf("t_%d", i), Text: fmt.Sprintf("order %d arrived broken", i), Amount: amount}
}

// writeTriageCorpus records the corpus with agent into dir: ticket i as
// run-NN.sftrace, the ones whose number is in packed as packed bundles.
func writeTriageCorpus(t testing.TB, dir string, agent replay.Agent, packed ...int) {
	t.Helper()
	for i := range healTickets {
		p := filepath.Join(dir, fmt.Sprintf("run-%02d.sftrace", i))
		res, err := replay.Record(context.Background(), "triage", healTicket(i), agent, replay.SaveTo(p))
		if err != nil || res.Err != nil {
			t.Fatalf("recording ticket %d: %v, %v", i, err, res.Err)
		}
		for _, n := range packed {
			if n == i {
				if err := trace.Pack(p, strings.TrimSuffix(p, ".sftrace")+trace.PackedSuffix); err != nil {
					t.Fatal(err)
				}
				os.RemoveAll(p)
			}
		}
	}
}

// triageFixture is a recorded corpus with the agent that recorded it and
// the fake model both agents use.
type triageFixture struct {
	dir    string
	model  *chatModel
	world  *triageWorld
	old    replay.Agent
	edited replay.Agent // the agent after the prompt edit
}

func newTriageFixture(t testing.TB, packed ...int) *triageFixture {
	t.Helper()
	f := &triageFixture{dir: t.TempDir(), model: newChatModel(t), world: &triageWorld{}}
	f.old = triageAgent(f.model, f.world, oldDecidePrompt, nil)
	f.edited = triageAgent(f.model, f.world, newDecidePrompt, nil)
	writeTriageCorpus(t, f.dir, f.old, packed...)
	f.model.reset()
	*f.world = triageWorld{}
	return f
}

// intents are the ways a test declares the prompt edit.
var intents = []struct {
	name   string
	intent []fork.Change
}{
	{"declared prompt", []fork.Change{fork.Prompt("decide", newDecidePrompt)}},
	{"declared passage", []fork.Change{fork.PromptReplace("decide", oldDecidePrompt, newDecidePrompt)}},
	{"declared append", []fork.Change{fork.PromptAppend("decide", " Escalate refunds above 50.")}},
	{"code fields", []fork.Change{fork.CodeFields(fork.All, "messages[0].content")}},
}

// TestHealClassifies runs every bundle of the corpus against the edited
// agent, the edit declared each way a test can: the 20 tickets whose
// decision stays the same changed only where intended, the 10 the model now
// escalates changed behavior, first at the decision's answer; nothing runs
// live before the decision.
func TestHealClassifies(t *testing.T) {
	t.Parallel()
	f := newTriageFixture(t)
	for _, tt := range intents {
		t.Run(tt.name, func(t *testing.T) {
			classes := map[fork.Class]int{}
			for i := range healTickets {
				tr, err := trace.Load(filepath.Join(f.dir, fmt.Sprintf("run-%02d.sftrace", i)))
				if err != nil {
					t.Fatal(err)
				}
				opts := []fork.RunOption{fork.Allow("escalate")}
				for _, c := range tt.intent {
					opts = append(opts, c)
				}
				v, err := fork.Heal(context.Background(), tr, f.edited, opts...)
				if err != nil {
					t.Fatalf("ticket %d: %v", i, err)
				}
				classes[v.Class]++
				want := fork.ClassIntended
				if i < 10 {
					want = fork.ClassChanged
				}
				if v.Class != want {
					t.Errorf("ticket %d: class %s, want %s\n%s", i, v.Class, want, v.Diff.Explain())
					continue
				}
				if v.FirstLive == nil || v.FirstLive.Kind != replay.KindLLM || v.FirstLive.Step != decideStep(tr) {
					t.Errorf("ticket %d: the tail started at %v, want the decision at step %d", i, v.FirstLive, decideStep(tr))
				}
				if want == fork.ClassChanged {
					sd := v.Diff.BehaviorChange()
					if sd == nil || sd.Base == nil || sd.Base.Step != decideStep(tr) || !strings.Contains(fmt.Sprint(sd.Changes), "output.message") {
						t.Errorf("ticket %d: first behavior change %+v, want the decision's answer", i, sd)
					}
				} else if v.LiveModelCalls != 1 || v.LiveToolCalls != 0 {
					t.Errorf("ticket %d: %d live model and %d live tool calls, want only the edited request", i, v.LiveModelCalls, v.LiveToolCalls)
				}
			}
			if classes[fork.ClassIntended] != 20 || classes[fork.ClassChanged] != 10 {
				t.Errorf("classes %v, want 20 intended and 10 changed", classes)
			}
		})
	}
}

// decideStep is the step of the decision's model call in a recording.
func decideStep(tr *trace.Trace) int {
	n := 0
	for _, c := range tr.Calls() {
		if ev := &tr.Events[c.Event]; ev.Type == trace.LLMRequest {
			n++
			if n == 2 {
				return ev.Step
			}
		}
	}
	return -1
}

// TestCorpusHeals heals the corpus after the prompt edit, under a budget
// that a full re-record would exceed: live calls happen only in the tails
// (the edited request of each run, and the 10 runs whose decision changed
// from there on), every bundle is replaced, and the 30 bundles then load
// with their integrity verified, replay frozen against the edited agent,
// and say what they healed and which code made them. Three of the bundles
// are packed, and are packed again.
func TestCorpusHeals(t *testing.T) {
	t.Parallel()
	f := newTriageFixture(t, 4, 17, 25)
	var full float64 // what re-recording every run would cost: the runs as recorded
	bases := map[string]*trace.Trace{}
	for i := range healTickets {
		name := fmt.Sprintf("run-%02d", i)
		tr, err := trace.Load(bundlePath(f.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		bases[name] = tr
		full += *tr.Totals.CostUSD
	}
	budget := full * 0.8

	res := sftest.Corpus(t, f.dir, f.edited, sftest.Intended(fork.Prompt("decide", newDecidePrompt)),
		sftest.ForkOptions(fork.Allow("escalate")), sftest.Heal("."), sftest.Budget(budget))

	spent, live := 0.0, 0
	for i, e := range res.Entries {
		ticket := fmt.Sprintf("t_%d", i)
		want, wantLive := "intended", 1 // the edited decision only: its answer is the same
		if i < 10 {
			want, wantLive = "changed", 2 // the decision and the reply, which now says otherwise
		}
		if e.Outcome != want || !e.Passed || !e.Healed {
			t.Errorf("%s: %s, passed %v, healed %v; want %s, passed and healed", e.Name, e.Outcome, e.Passed, e.Healed, want)
		}
		if got := f.model.live(ticket); got != wantLive || e.LiveCalls != wantLive+map[bool]int{true: 1}[i < 10] {
			t.Errorf("%s: %d live model calls reached the model and %d live calls were counted; want %d model calls (and the escalation)", e.Name, got, e.LiveCalls, wantLive)
		}
		if !strings.Contains(e.Tail, "tail from model call 'openai/fake-4o' at step 8") || e.Cost <= 0 || e.Tokens <= 0 {
			t.Errorf("%s: tail %q, cost %v, tokens %d; want where the tail started and what it spent", e.Name, e.Tail, e.Cost, e.Tokens)
		}
		if e.Build.Module != "github.com/stepfork/stepfork" {
			t.Errorf("%s: build %+v, want the code that healed it", e.Name, e.Build)
		}
		spent += e.Cost
		live += e.LiveCalls
	}
	if n := f.model.calls.Load(); n != 40 {
		t.Errorf("the heal made %d live model calls, want 40 (one per run, and one more in each of the 10 changed runs)", n)
	}
	if f.world.escalations.Load() != 10 || f.world.refunds.Load() != 0 || f.world.lookups.Load() != 0 {
		t.Errorf("tools run live: %d escalations, %d refunds, %d lookups; want only the 10 escalations", f.world.escalations.Load(), f.world.refunds.Load(), f.world.lookups.Load())
	}
	if spent >= budget || full <= budget {
		t.Errorf("the heal spent %v against a budget of %v that a full re-record (%v) exceeds", spent, budget, full)
	}
	t.Logf("healing cost %v over %d live calls; re-recording would cost %v over %d model calls", spent, live, full, 3*healTickets)

	// The healed corpus: every bundle loads and verifies, replays frozen
	// against the edited agent, and records its provenance and code.
	f.model.reset()
	again := sftest.Corpus(t, f.dir, f.edited)
	for _, e := range again.Entries {
		if e.Outcome != "replayed" || !e.Passed {
			t.Errorf("%s after the heal: %s", e.Name, e.Outcome)
		}
	}
	if f.model.calls.Load() != 0 {
		t.Errorf("the frozen replay of the healed corpus reached the model %d times", f.model.calls.Load())
	}
	for name, base := range bases {
		p := bundlePath(f.dir, name)
		healed := sftest.Load(t, p)
		info, err := fork.ReadInfo(healed)
		if err != nil || info.Kind != fork.KindHeal || info.ParentRunID != base.RunID || info.ParentTracePath != base.Path || time.Since(info.ForkTimestamp) > time.Hour {
			t.Errorf("%s: provenance %+v, %v; want a heal of run %s at %s", name, info, err, base.RunID, base.Path)
		}
		if b, ok, err := healed.Build(); !ok || err != nil || b.Module == "" {
			t.Errorf("%s: build %+v, %v, %v", name, b, ok, err)
		}
		if res := trace.VerifyIntegrity(p); res.Status != trace.IntegrityVerified {
			t.Errorf("%s: integrity %s", name, res.Status)
		}
		if r := trace.Validate(context.Background(), healed); !r.Valid() {
			t.Errorf("%s: the healed run is not strictly valid: %v", name, r.Errors())
		}
	}
}

// bundlePath is the bundle called name in dir, packed or not.
func bundlePath(dir, name string) string {
	p := filepath.Join(dir, name+".sftrace")
	if _, err := os.Stat(p); err != nil {
		return filepath.Join(dir, name+trace.PackedSuffix)
	}
	return p
}

// TestCorpusHealDryRun estimates the heal: nothing runs live, nothing is
// written, and each bundle says where its tail would start and what it
// would cost.
func TestCorpusHealDryRun(t *testing.T) {
	t.Parallel()
	f := newTriageFixture(t)
	before, err := os.ReadFile(filepath.Join(f.dir, "run-03.sftrace", trace.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	res := sftest.Corpus(t, f.dir, f.edited, sftest.Intended(fork.Prompt("decide", newDecidePrompt)),
		sftest.ForkOptions(fork.Allow("escalate")), sftest.Heal("."), sftest.DryRun())
	if f.model.calls.Load() != 0 || f.world.escalations.Load() != 0 {
		t.Errorf("a dry run made %d model calls and %d escalations", f.model.calls.Load(), f.world.escalations.Load())
	}
	after, _ := os.ReadFile(filepath.Join(f.dir, "run-03.sftrace", trace.EventsFile))
	if !bytes.Equal(before, after) {
		t.Error("a dry run rewrote a bundle")
	}
	if len(res.Entries) != healTickets {
		t.Fatalf("%d entries", len(res.Entries))
	}
	for _, e := range res.Entries {
		if e.Outcome != "estimated" || !strings.Contains(e.Tail, "tail from model call 'openai/fake-4o' at step 8: ~$") || e.Cost <= 0 {
			t.Errorf("%s: %s, %q, %v; want an estimate of the tail from the decision", e.Name, e.Outcome, e.Tail, e.Cost)
		}
	}
}

// The child test runs Corpus with the edited agent in a new process, with
// the options SFTEST_HEAL names, so that the tests can see a failing corpus.
func TestChildHeal(t *testing.T) {
	child(t)
	m := newChatModel(t)
	world := &triageWorld{}
	edited := triageAgent(m, world, newDecidePrompt, nil)
	opts := []sftest.CorpusOption{sftest.Intended(fork.Prompt("decide", newDecidePrompt))}
	for o := range strings.SplitSeq(os.Getenv("SFTEST_HEAL"), ",") {
		switch {
		case o == "allow":
			opts = append(opts, sftest.ForkOptions(fork.Allow("escalate")))
		case strings.HasPrefix(o, "budget="):
			b, _ := strconv.ParseFloat(strings.TrimPrefix(o, "budget="), 64)
			opts = append(opts, sftest.Budget(b))
		}
	}
	t.Cleanup(func() {
		t.Logf("live model calls: %d; escalations: %d", m.calls.Load(), world.escalations.Load())
	})
	sftest.Corpus(t, os.Getenv("SFTEST_CORPUS"), edited, opts...)
}

func runHealChild(t *testing.T, env []string, args ...string) (string, bool) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"-test.run=^TestChildHeal$", "-test.v"}, args...)...)
	cmd.Env = append(append(os.Environ(), "SFTEST_CHILD=1", "TEST_TOTAL_SHARDS=", "TEST_SHARD_INDEX=", "TEST_SHARD_STATUS_FILE="), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running the child: %v", err)
	}
	return string(out), err == nil
}

// TestCorpusIntendedReport runs the corpus test after the prompt edit,
// without healing: the summary line reads 20 intended and 10 changed, each
// changed bundle fails with its first behavioral divergence, and the
// results file carries the same for stepfork report.
func TestCorpusIntendedReport(t *testing.T) {
	t.Parallel()
	f := newTriageFixture(t)
	results := t.TempDir()
	out, ok := runHealChild(t, []string{"SFTEST_CORPUS=" + f.dir, "SFTEST_HEAL=allow"}, "-stepfork.results="+results)
	if ok {
		t.Fatalf("a corpus whose behavior changed passed:\n%s", out)
	}
	for _, w := range []string{
		"corpus TestChildHeal: 30 bundle(s), 20 passed, 10 failed: 20 intended, 10 changed",
		"--- FAIL: TestChildHeal/run-03",
		"--- PASS: TestChildHeal/run-13",
		"sftest.Corpus: the behavior of " + filepath.Join(f.dir, "run-03.sftrace") + " changed: step 8: llm 'openai/fake-4o' changed: output.message.content \"refund\" → \"escalate\"",
		"-stepfork.heal='^run-03$'",
		"intended: prompt of 'decide'",
		"FAIL run-03: changed — step 8: llm 'openai/fake-4o' changed",
		"live model calls: 40; escalations: 10",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("the output lacks %q:\n%s", w, out)
		}
	}
	rep, err := corpus.Merge(readResults(t, results))
	if err != nil {
		t.Fatal(err)
	}
	if got := corpus.Counts(rep.Corpora[0].Entries); got != "20 intended, 10 changed" {
		t.Errorf("the results count %q", got)
	}
}

// TestCorpusHealRefused: a heal over its budget fails before anything runs
// live; a heal whose tail calls a tool nothing allows stops those bundles,
// naming the tool, and leaves them as they were.
func TestCorpusHealRefused(t *testing.T) {
	t.Parallel()
	f := newTriageFixture(t)
	out, ok := runHealChild(t, []string{"SFTEST_CORPUS=" + f.dir, "SFTEST_HEAL=allow,budget=0.000001"}, "-stepfork.heal=.")
	if ok || !strings.Contains(out, "over the budget of $0.000001; nothing ran live") || !strings.Contains(out, "live model calls: 0; escalations: 0") {
		t.Errorf("a heal over budget ran or said something else:\n%s", out)
	}
	before, _ := os.ReadFile(filepath.Join(f.dir, "run-03.sftrace", trace.EventsFile))
	out, ok = runHealChild(t, []string{"SFTEST_CORPUS=" + f.dir, "SFTEST_HEAL="}, "-stepfork.heal=.")
	if ok {
		t.Fatalf("a heal whose tails call a tool nothing allows passed:\n%s", out)
	}
	for _, w := range []string{
		"run-03.sftrace cannot be healed: the agent now calls tool 'escalate' (step 11)",
		`sftest.ForkOptions(fork.Allow("escalate"))`,
		"corpus TestChildHeal: 30 bundle(s), 20 passed, 10 failed: 20 intended, 10 changed, 20 healed",
		"escalations: 0",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("the output lacks %q:\n%s", w, out)
		}
	}
	after, _ := os.ReadFile(filepath.Join(f.dir, "run-03.sftrace", trace.EventsFile))
	if !bytes.Equal(before, after) {
		t.Error("a bundle the guard stopped was rewritten")
	}
}

// TestCorpusTimeInPrompt: the triage agent writes the current time into
// the prompt of its decision. A matcher that ignores timestamps keeps the
// frozen replay of the corpus, memoized forks and the diff working; with
// the prompt edit declared too, the corpus still classes 20 intended and
// 10 changed bundles.
func TestCorpusTimeInPrompt(t *testing.T) {
	t.Parallel()
	m := newChatModel(t)
	world := &triageWorld{}
	dir := t.TempDir()
	recorded := func() string { return "2026-03-14T09:30:00Z" }
	now := func() string { return time.Now().UTC().Format(time.RFC3339Nano) }
	writeTriageCorpus(t, dir, triageAgent(m, world, oldDecidePrompt, recorded))
	m.reset()
	agent := triageAgent(m, world, oldDecidePrompt, now)
	ignore := replay.IgnoreTimestamps().Model("openai/fake-4o")

	res := sftest.Corpus(t, dir, agent, sftest.Match(ignore))
	for _, e := range res.Entries {
		if e.Outcome != "replayed" || !e.Passed {
			t.Errorf("%s: %s", e.Name, e.Outcome)
		}
	}
	base := sftest.Load(t, filepath.Join(dir, "run-12.sftrace"))
	v := sftest.Fork(t, base, fork.Start(), agent, fork.Memoize(), fork.Match(ignore))
	if v.LiveModelCalls != 0 || v.Class != fork.ClassUnchanged || v.Diff.Matched != 1 {
		t.Errorf("memoized fork: %d live calls, class %s, %d matched\n%s", v.LiveModelCalls, v.Class, v.Diff.Matched, v.Diff.Explain())
	}
	if m.calls.Load() != 0 {
		t.Errorf("the model was called %d times", m.calls.Load())
	}

	edited := triageAgent(m, world, newDecidePrompt, now)
	classes := map[fork.Class]int{}
	for i := range healTickets {
		tr, err := trace.Load(filepath.Join(dir, fmt.Sprintf("run-%02d.sftrace", i)))
		if err != nil {
			t.Fatal(err)
		}
		v, err := fork.Heal(context.Background(), tr, edited, fork.Match(ignore),
			fork.PromptReplace("decide", oldDecidePrompt, newDecidePrompt), fork.Allow("escalate"))
		if err != nil {
			t.Fatal(err)
		}
		classes[v.Class]++
	}
	if classes[fork.ClassIntended] != 20 || classes[fork.ClassChanged] != 10 {
		t.Errorf("classes %v, want 20 intended and 10 changed", classes)
	}
}

// TestChildRecordHeal runs sftest.Record in a new process, in the
// directory SFTEST_DIR, with the triage agent whose decide prompt is
// SFTEST_PROMPT.
func TestChildRecordHeal(t *testing.T) {
	child(t)
	if err := os.Chdir(os.Getenv("SFTEST_DIR")); err != nil {
		t.Fatal(err)
	}
	m := newChatModel(t)
	t.Cleanup(func() { t.Logf("live model calls: %d", m.calls.Load()) })
	sftest.Record(t, "triage", healTicket(15), triageAgent(m, &triageWorld{}, os.Getenv("SFTEST_PROMPT"), nil))
}

// TestRecordHeals: after the prompt edit, sftest.Record fails and says how
// to heal; -stepfork.heal heals the trace from the edited call on (two
// live model calls of three), after which it replays frozen.
func TestRecordHeals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := newChatModel(t)
	if _, err := replay.Record(context.Background(), "triage", healTicket(15), triageAgent(m, &triageWorld{}, oldDecidePrompt, nil),
		replay.SaveTo(filepath.Join(dir, "testdata", "triage.sftrace"))); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, bool) {
		exe, _ := os.Executable()
		cmd := exec.Command(exe, append([]string{"-test.run=^TestChildRecordHeal$", "-test.v"}, args...)...)
		cmd.Env = append(os.Environ(), "SFTEST_CHILD=1", "SFTEST_DIR="+dir, "SFTEST_PROMPT="+newDecidePrompt)
		out, err := cmd.CombinedOutput()
		return string(out), err == nil
	}
	out, ok := run()
	if ok || !strings.Contains(out, "heal it (the tail from the divergence runs live):") || !strings.Contains(out, "go test -run '^TestChildRecordHeal$' -stepfork.heal='^triage$'") {
		t.Fatalf("an edited agent replayed the old recording, or did not say how to heal:\n%s", out)
	}
	out, ok = run("-stepfork.heal=.")
	if !ok || !strings.Contains(out, "sftest.Record: healed testdata/triage.sftrace (changed): tail from model call 'openai/fake-4o' at step 8: 1 live model call(s)") ||
		!strings.Contains(out, "live model calls: 1") {
		t.Fatalf("the heal:\n%s", out)
	}
	if out, ok = run(); !ok || !strings.Contains(out, "live model calls: 0") {
		t.Fatalf("the healed trace does not replay frozen:\n%s", out)
	}
}

// TestChildReadmeCorpus is README.md's corpus after a prompt edit: the
// triage fixture's 30 bundles against the edited agent, the edit declared.
func TestChildReadmeCorpus(t *testing.T) {
	child(t)
	f := newTriageFixture(t)
	sftest.Corpus(t, f.dir, f.edited,
		sftest.Intended(fork.Prompt("decide", newDecidePrompt)),
		sftest.ForkOptions(fork.Allow("escalate")))
}

// TestReadmeCorpusOutput: the output README.md quotes under its corpus
// test is what sftest.Corpus prints for the triage fixture after the
// prompt edit (TestChildReadmeCorpus): each line README shows, but "…", is
// a line of the summary, in order (the recording revision aside).
func TestReadmeCorpusOutput(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "\n// corpus TestCorpus: ")
	if !ok {
		t.Fatal("README.md quotes no output of a corpus test (a line starting // corpus TestCorpus:)")
	}
	block, _, _ = strings.Cut("corpus TestCorpus: "+block, "\n```")
	normalize := func(l string) string {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "recorded by") {
			return "recorded by"
		}
		return l
	}
	var want []string
	for _, l := range strings.Split(block, "\n") {
		if l = normalize(strings.TrimPrefix(l, "//")); l != "" && l != "…" {
			want = append(want, l)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestChildReadmeCorpus$")
	cmd.Env = append(os.Environ(), "SFTEST_CHILD=1", "TEST_TOTAL_SHARDS=", "TEST_SHARD_INDEX=", "TEST_SHARD_STATUS_FILE=")
	out, _ := cmd.CombinedOutput() // it fails: ten bundles changed
	_, summary, ok := strings.Cut(string(out), "corpus TestChildReadmeCorpus: ")
	if !ok {
		t.Fatalf("the child printed no corpus summary:\n%s", out)
	}
	var got []string
	for _, l := range strings.Split("corpus TestCorpus: "+summary, "\n") {
		got = append(got, normalize(l))
	}
	i := 0
	for _, l := range got {
		if i < len(want) && l == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("README.md quotes the corpus output line %q, which the code does not print (in that order); it prints:\n%s", want[i], strings.Join(got, "\n"))
	}
}
