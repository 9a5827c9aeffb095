package fork

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// The test agents of the counterfactual fork. world is what they touch;
// its counters say what really executed, so a test can assert that a
// memoized null fork made no live call.

type world struct {
	tools, models atomic.Int64
	published     atomic.Int64
}

// ---- refund: a failed run (the product example) ----

type RefundRequest struct {
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
}

type OrderQuery struct {
	OrderID string `json:"order_id"`
}

type Order struct {
	OrderID  string  `json:"order_id"`
	Amount   float64 `json:"amount"`
	Customer string  `json:"customer"`
}

type RefundInput struct {
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
}

type RefundReceipt struct {
	RefundID string `json:"refund_id"`
}

type RefundOutcome struct {
	Status   string `json:"status"`
	RefundID string `json:"refund_id,omitempty"`
}

// PolicyViolation is the payment system's refusal.
type PolicyViolation struct{ Amount float64 }

func (e *PolicyViolation) Error() string {
	return fmt.Sprintf("refund of %.2f USD exceeds the automatic refund limit", e.Amount)
}

func (w *world) getOrder(_ context.Context, q OrderQuery) (Order, error) {
	w.tools.Add(1)
	return Order{OrderID: q.OrderID, Amount: 250, Customer: "c_77"}, nil
}

func (w *world) issueRefund(_ context.Context, in RefundInput) (RefundReceipt, error) {
	w.tools.Add(1)
	if in.Amount > 100 {
		return RefundReceipt{}, &PolicyViolation{Amount: in.Amount}
	}
	return RefundReceipt{RefundID: "rf_" + in.OrderID}, nil
}

// model is a deterministic fake model: it escalates when its system prompt
// speaks of approval, and otherwise echoes what it was given, so prompt,
// model and temperature changes show in its output.
func (w *world) model(_ context.Context, req replay.Request) (replay.Response, error) {
	w.models.Add(1)
	last := req.Messages[len(req.Messages)-1].Content
	content := fmt.Sprintf("%s | %s | %s", req.System, req.Model, last)
	if strings.Contains(last, "Refund ") {
		content = "refund"
		if strings.Contains(req.System, "approval") {
			content = "escalate"
		}
	}
	if req.Temperature != nil {
		content += fmt.Sprintf(" (t=%g)", *req.Temperature)
	}
	return replay.Response{Model: req.Model, Content: content,
		Usage: replay.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, CostUSD: 0.002}}, nil
}

func (w *world) refundAgent() replay.Agent {
	return w.refundAgentPrompt("You handle refunds. Approve what customers ask for.")
}

// refundAgentPrompt is the refund agent with its decision's system prompt
// edited.
func (w *world) refundAgentPrompt(system string) replay.Agent {
	getOrder := replay.Tool("get_order", w.getOrder)
	issue := replay.Tool("issue_refund", w.issueRefund)
	return replay.Typed(func(ctx context.Context, in RefundRequest) (RefundOutcome, error) {
		var order Order
		err := replay.Node(ctx, "lookup", func(ctx context.Context) error {
			var err error
			order, err = getOrder(ctx, OrderQuery{OrderID: in.OrderID})
			return err
		})
		if err != nil {
			return RefundOutcome{}, err
		}
		limit := replay.Param(ctx, "policy_limit", 100.0)
		var out RefundOutcome
		err = replay.Node(ctx, "decide", func(ctx context.Context) error {
			resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "fake-1",
				System: system,
				Messages: []replay.Message{{Role: "user", Content: fmt.Sprintf("Refund %.2f USD for order %s (policy limit %.2f USD).",
					order.Amount, order.OrderID, limit)}}}, w.model)
			if err != nil {
				return err
			}
			action := replay.Decide(ctx, "action", resp.Content)
			if err := replay.Set(ctx, "decision", action); err != nil {
				return err
			}
			if action == "escalate" {
				out = RefundOutcome{Status: "escalated"}
				return nil
			}
			r, err := issue(ctx, RefundInput{OrderID: order.OrderID, Amount: order.Amount})
			if err != nil {
				return err
			}
			out = RefundOutcome{Status: "refunded", RefundID: r.RefundID}
			return nil
		})
		return out, err
	})
}

// ---- research: a completed run with every kind of marker ----

type Topic struct {
	Topic string `json:"topic"`
}

type SearchInput struct {
	Query string `json:"query"`
}

type PublishInput struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

type Report struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Draft    string `json:"draft"`
	Route    string `json:"route"`
	URL      string `json:"url"`
	Dice     int    `json:"dice"`
	MaxWords int    `json:"max_words"`
	Started  string `json:"started"`
}

func (w *world) search(_ context.Context, in SearchInput) ([]string, error) {
	w.tools.Add(1)
	return []string{in.Query + ": result A", in.Query + ": result B"}, nil
}

func (w *world) publish(_ context.Context, in PublishInput) (string, error) {
	w.tools.Add(1)
	w.published.Add(1)
	return "https://example.com/" + strings.ReplaceAll(strings.ToLower(in.Title), " ", "-"), nil
}

// rawTitle answers an OpenAI-shaped chat completion body.
func (w *world) rawTitle(_ context.Context, body trace.Value) (trace.Value, error) {
	w.models.Add(1)
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := body.Decode(&req); err != nil {
		return trace.Value{}, err
	}
	parts := []string{}
	for _, m := range req.Messages {
		parts = append(parts, m.Role+":"+m.Content)
	}
	return trace.ValueOf(map[string]any{"model": req.Model, "choices": []any{map[string]any{
		"message": map[string]any{"role": "assistant", "content": strings.Join(parts, " / ")}}}})
}

func (w *world) researchAgent() replay.Agent {
	search := replay.Tool("search", w.search)
	publish := replay.Tool("publish", w.publish)
	return replay.Typed(func(ctx context.Context, in Topic) (Report, error) {
		rep := Report{ID: replay.NewID(ctx), Started: replay.Now(ctx).Format("2006-01-02T15:04:05Z07:00")}
		var notes []string
		err := replay.Node(ctx, "research", func(ctx context.Context) error {
			for _, q := range []string{in.Topic + " basics", in.Topic + " history"} {
				r, err := search(ctx, SearchInput{Query: q})
				if err != nil {
					return err
				}
				notes = append(notes, r...)
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
		rep.MaxWords = replay.Param(ctx, "max_words", 120)
		tone := replay.Read(ctx, "tone", "neutral")
		err = replay.Node(ctx, "title", func(ctx context.Context) error {
			body := trace.MustValueOf(map[string]any{"model": "gpt-4o-mini", "temperature": 0.3, "messages": []any{
				map[string]any{"role": "system", "content": "You write titles."},
				map[string]any{"role": "user", "content": in.Topic},
			}})
			out, err := replay.LLMRaw(ctx, "openai", "gpt-4o-mini", body, w.rawTitle)
			if err != nil {
				return err
			}
			rep.Title, _ = out.Get("choices").Get("0").Str()
			var parsed struct {
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			if err := out.Decode(&parsed); err == nil && len(parsed.Choices) > 0 {
				rep.Title = parsed.Choices[0].Message.Content
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
		write := func(system, prompt string) error {
			return replay.Node(ctx, "write", func(ctx context.Context) error {
				temp := 0.2
				resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "fake-1", System: system, Temperature: &temp,
					Messages: []replay.Message{{Role: "user", Content: prompt}}}, w.model)
				if err != nil {
					return err
				}
				rep.Draft = resp.Content
				return replay.Set(ctx, "draft", rep.Draft)
			})
		}
		if err := write("You write in a "+tone+" tone.", fmt.Sprintf("%d words on %s from %s", rep.MaxWords, in.Topic, strings.Join(notes, "; "))); err != nil {
			return rep, err
		}
		rep.Route = replay.Decide(ctx, "route", map[bool]string{true: "revise", false: "publish"}[len(rep.Draft) > 20])
		if rep.Route == "revise" {
			if err := write("Revise the draft.", rep.Draft); err != nil {
				return rep, err
			}
		}
		rep.Dice, _ = replay.SideEffect(ctx, "dice", func() (int, error) { return 4, nil })
		ok, err := replay.Approve(ctx, "publish", func(context.Context) (bool, error) { return true, nil })
		if err != nil {
			return rep, err
		}
		if ok {
			url, err := publish(ctx, PublishInput{Title: in.Topic, Body: rep.Draft})
			if err != nil {
				return rep, err
			}
			rep.URL = url
		}
		return rep, replay.Set(ctx, "status", map[bool]string{true: "published", false: "held"}[ok])
	})
}

// ---- recorded test traces ----

// agentCase is a recorded trace in testdata/ and the agent that made it.
type agentCase struct {
	name  string
	path  string
	input any
	agent func(w *world) replay.Agent
}

var agentCases = []agentCase{
	{"refund", "../testdata/refund-failure.sftrace", RefundRequest{OrderID: "o_1842", Amount: 250},
		func(w *world) replay.Agent { return w.refundAgent() }},
	{"research", "../testdata/research.sftrace", Topic{Topic: "vaccines"},
		func(w *world) replay.Agent { return w.researchAgent() }},
}

// loadCase loads a recorded trace; with STEPFORK_REGEN=1 it records it
// again from its agent first (and the new bundle is to be committed).
func loadCase(t testing.TB, c agentCase) *trace.Trace {
	t.Helper()
	if os.Getenv("STEPFORK_REGEN") == "1" {
		regen(t, c)
	}
	tr, err := trace.Load(c.path)
	require.NoError(t, err, "run STEPFORK_REGEN=1 go test ./fork/ -run TestRegenerate to record it")
	return tr
}

var (
	regenMu     sync.Mutex
	regenerated = map[string]bool{}
)

func regen(t testing.TB, c agentCase) {
	t.Helper()
	regenMu.Lock()
	defer regenMu.Unlock()
	if regenerated[c.path] {
		return
	}
	regenerated[c.path] = true
	w := &world{}
	_, err := replay.Record(context.Background(), c.name+"-agent", c.input, c.agent(w), replay.SaveTo(c.path, trace.Overwrite()))
	var pv *PolicyViolation
	if err != nil && !errors.As(err, &pv) {
		t.Fatalf("recording %s: %v", c.path, err)
	}
}

func caseNamed(t testing.TB, name string) (agentCase, *trace.Trace) {
	t.Helper()
	for _, c := range agentCases {
		if c.name == name {
			return c, loadCase(t, c)
		}
	}
	t.Fatalf("no agent case %q", name)
	return agentCase{}, nil
}
