package genkit

import (
	"fmt"
	"math"
	"sort"

	"github.com/firebase/genkit/go/ai"
	"github.com/stepfork/stepfork/replay"
)

// An Option configures [Plugin] and [Model]. [WithPrices] is one.
type Option interface {
	apply(*options)
}

// options is what the Options say: the prices of the models, and the first
// bad price (reported by every call of a model recorded with it, as
// replay.Transport reports its own).
type options struct {
	prices replay.Prices
	err    error
}

func newOptions(opts []Option) *options {
	o := &options{}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(o)
		}
	}
	return o
}

type pricesOption replay.Prices

// WithPrices gives the recorded models their prices, keyed by model label
// ("openai/gpt-4o", the Genkit model name) or model ("gpt-4o"); the label
// wins, as for replay.Transport. A live call of a priced model records its
// cost (llm_response cost_usd) from the tokens its response reports:
//
//	(input − cached) × Input + cached × CachedInput + output × Output
//
// per million tokens, with cached input billed as Input when CachedInput is
// zero and a model's thinking tokens counted as output. A model that is not
// listed records its tokens and a null cost, so that a cost assertion over
// it fails rather than passing. Given more than once, the later price of a
// model wins.
func WithPrices(p replay.Prices) Option { return pricesOption(p) }

func (p pricesOption) apply(o *options) {
	if o.prices == nil {
		o.prices = make(replay.Prices, len(p))
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		pr := p[k]
		for _, f := range [...]struct {
			name string
			v    float64
		}{{"Input", pr.Input}, {"CachedInput", pr.CachedInput}, {"CacheWrite", pr.CacheWrite}, {"Output", pr.Output}} {
			if (f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0)) && o.err == nil {
				o.err = fmt.Errorf("contrib/genkit: WithPrices: [%q].%s is not a non-negative number of US dollars per million tokens", k, f.name)
			}
		}
		o.prices[k] = pr
	}
}

// usage is the replay.Usage of a Genkit response's usage, priced at the
// model's price when it has one; ok is false when the response reports no
// tokens.
//
// Genkit's OutputTokens are the answer's tokens; a model's thinking tokens
// (ThoughtsTokens) are counted into the completion when the total says they
// were not in OutputTokens already (Gemini counts them apart, OpenAI's
// completion tokens include them).
func (o *options) usage(provider, model string, u *ai.GenerationUsage) (replay.Usage, bool) {
	if u == nil || u.InputTokens == 0 && u.OutputTokens == 0 && u.TotalTokens == 0 {
		return replay.Usage{}, false
	}
	out := replay.Usage{
		PromptTokens:     int64(u.InputTokens),
		CompletionTokens: int64(u.OutputTokens),
		TotalTokens:      int64(u.TotalTokens),
		CachedTokens:     int64(u.CachedContentTokens),
		ReasoningTokens:  int64(u.ThoughtsTokens),
	}
	if t := out.ReasoningTokens; t > 0 && out.PromptTokens+out.CompletionTokens+t <= out.TotalTokens {
		out.CompletionTokens += t
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	label := model
	if provider != "" {
		label = provider + "/" + model
	}
	p, ok := o.prices[label]
	if !ok {
		p, ok = o.prices[model]
	}
	if ok {
		cached := p.CachedInput
		if cached == 0 {
			cached = p.Input
		}
		fresh := max(out.PromptTokens-out.CachedTokens, 0)
		out.CostUSD = (float64(fresh)*p.Input + float64(out.CachedTokens)*cached + float64(out.CompletionTokens)*p.Output) / 1e6
	}
	return out, true
}
