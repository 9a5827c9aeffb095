package replay

import (
	"fmt"
	"math"
	"sort"
)

// A TransportOption configures Transport. Prices is one.
type TransportOption interface {
	applyTransport(*transport)
}

// Price is what a model's tokens cost, in US dollars per million tokens.
// CachedInput and CacheWrite price the input tokens read from and written
// to the provider's prompt cache; zero bills them as Input.
type Price struct {
	Input       float64
	CachedInput float64
	CacheWrite  float64
	Output      float64 // output tokens, reasoning tokens included
}

// Prices gives Transport the price of each model, keyed by model label
// ("openai/gpt-4o") or model ("gpt-4o"); the label wins. A live model call
// of a priced model records its cost (llm_response cost_usd) from the tokens
// of its response:
//
//	(prompt − cached − cache-written) × Input + cached × CachedInput
//	  + cache-written × CacheWrite + completion × Output
//
// A model that is not listed has no price: its calls record tokens and a
// null cost, and a cost assertion over them fails rather than passing. A
// cost the base RoundTripper reports with ReportUsage wins. Give Prices more
// than once and the later price of a model wins.
//
//	client := &http.Client{Transport: replay.Transport(nil, replay.Prices{
//		"gpt-4o-mini": {Input: 0.15, CachedInput: 0.075, Output: 0.60},
//	})}
type Prices map[string]Price

func (p Prices) applyTransport(t *transport) {
	if t.prices == nil {
		t.prices = make(Prices, len(p))
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		pr := p[k]
		if bad := pr.invalid(); bad != "" && t.err == nil {
			t.err = fmt.Errorf("replay.Transport: Prices[%q].%s is not a non-negative number of US dollars per million tokens", k, bad)
		}
		t.prices[k] = pr
	}
}

func (p Price) invalid() string {
	for _, f := range [...]struct {
		name string
		v    float64
	}{{"Input", p.Input}, {"CachedInput", p.CachedInput}, {"CacheWrite", p.CacheWrite}, {"Output", p.Output}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return f.name
		}
	}
	return ""
}

// cost is the price of u's tokens.
func (p Price) cost(u Usage) float64 {
	cachedPrice, writePrice := p.CachedInput, p.CacheWrite
	if cachedPrice == 0 {
		cachedPrice = p.Input
	}
	if writePrice == 0 {
		writePrice = p.Input
	}
	fresh := max(u.PromptTokens-u.CachedTokens-u.CacheWriteTokens, 0)
	return (float64(fresh)*p.Input + float64(u.CachedTokens)*cachedPrice +
		float64(u.CacheWriteTokens)*writePrice + float64(u.CompletionTokens)*p.Output) / 1e6
}

// price is the price of a model, by label or model.
func (t *transport) price(label, model string) (Price, bool) {
	if p, ok := t.prices[label]; ok {
		return p, true
	}
	p, ok := t.prices[model]
	return p, ok
}
