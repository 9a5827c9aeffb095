package explore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// The shop agent of these tests: it looks an order up, asks a model what
// to do, checks the answer against the refund limit, and then pays (a
// side effect, with a person's approval) or files a case. The canaries are
// secrets it handles: a credential in the order and in the model's prompt,
// a password under a sensitive key; no page, answer or code of a session
// may show them.
const (
	canaryToken    = "sk-proj-EXPLORECANARY0123456789abcdef"
	canaryPassword = "hunter2-explore-canary"
)

type orderQuery struct {
	ID string `json:"id"`
}

type order struct {
	ID       string  `json:"id"`
	Amount   float64 `json:"amount"`
	Limit    float64 `json:"limit"`
	APIKey   string  `json:"api_key"`
	Password string  `json:"password"`
}

type payment struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

// shop is one agent with counters of what really ran.
type shop struct {
	paid, filed, modelCalls atomic.Int64
	// slow makes the model wait until its context is done.
	slow atomic.Bool
	run  replay.Agent
}

func newShop() *shop {
	s := &shop{}
	lookup := replay.Tool("lookup_order", func(_ context.Context, q orderQuery) (order, error) {
		return order{ID: q.ID, Amount: 249, Limit: 100, APIKey: canaryToken, Password: canaryPassword}, nil
	})
	pay := replay.Tool("pay", func(_ context.Context, p payment) (string, error) {
		s.paid.Add(1)
		return "paid " + p.ID, nil
	})
	file := replay.Tool("file_case", func(_ context.Context, p payment) (string, error) {
		s.filed.Add(1)
		return "case-" + p.ID, nil
	})
	model := func(ctx context.Context, req replay.Request) (replay.Response, error) {
		s.modelCalls.Add(1)
		if s.slow.Load() {
			<-ctx.Done()
			return replay.Response{}, ctx.Err()
		}
		action := "refund"
		if strings.Contains(req.System, "escalate") {
			action = "escalate"
		}
		return replay.Response{Content: action, Usage: replay.Usage{PromptTokens: 50, CompletionTokens: 2, TotalTokens: 52, CostUSD: 0.001}}, nil
	}
	s.run = replay.Typed(func(ctx context.Context, q orderQuery) (map[string]any, error) {
		var o order
		if err := replay.Node(ctx, "lookup", func(ctx context.Context) (err error) {
			o, err = lookup(ctx, q)
			if err == nil {
				err = replay.Set(ctx, "order", o)
			}
			return err
		}); err != nil {
			return nil, err
		}
		var action string
		if err := replay.Node(ctx, "decide", func(ctx context.Context) error {
			resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "triage-1",
				System:   "Refund what the customer asks. Key " + o.APIKey + ".",
				Messages: []replay.Message{{Role: "user", Content: fmt.Sprintf("order %s: %.2f USD", o.ID, o.Amount)}}}, model)
			if err != nil {
				return err
			}
			action = replay.Decide(ctx, "action", resp.Content)
			if action == "refund" && o.Amount > o.Limit {
				return fmt.Errorf("refund of %.2f is above the limit of %.2f (key %s)", o.Amount, o.Limit, o.APIKey)
			}
			return nil
		}); err != nil {
			return nil, err
		}
		var receipt string
		err := replay.Node(ctx, "act", func(ctx context.Context) (err error) {
			switch action {
			case "refund":
				ok, err := replay.Approve(ctx, "confirm", func(context.Context) (bool, error) { return false, errors.New("nobody to ask") })
				if err != nil || !ok {
					return fmt.Errorf("not confirmed: %v", err)
				}
				receipt, err = pay(ctx, payment{ID: o.ID, Amount: o.Amount})
				return err
			case "escalate":
				receipt, err = file(ctx, payment{ID: o.ID, Amount: o.Amount})
				return err
			}
			return fmt.Errorf("unknown action %q", action)
		})
		return map[string]any{"action": action, "receipt": receipt, "token": o.APIKey}, err
	})
	return s
}

// record records the shop agent's failing run: the model proposes a
// refund above the limit.
func record(t testing.TB, s *shop) *trace.Trace {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := replay.Record(ctx, "shop", orderQuery{ID: "o_7"}, s.run)
	if res == nil || res.Trace == nil {
		t.Fatalf("recording the shop agent: %v", err)
	}
	if res.Trace.Status != trace.RunFailed {
		t.Fatalf("the recorded run %s, want failed", res.Trace.Status)
	}
	s.paid.Store(0)
	s.filed.Store(0)
	s.modelCalls.Store(0)
	return res.Trace
}
