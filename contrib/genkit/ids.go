package genkit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/firebase/genkit/go/ai"
	"github.com/stepfork/stepfork/replay"
)

// minted reports to the session, through replay.ReportIDs, the ids the
// provider minted in one live answer, each once, in the order the answer
// holds them (a stream's chunks, then its final response): the refs of its
// tool requests (kind "call") and the ids its custom data names (see
// customIDs). When a fork's tail runs the model live, each is bound to the
// id of its kind the recorded answer reported, and the run records the
// recorded one wherever the live one appears (this answer, the tool
// responses of the next request that carry the refs back), so a tail whose
// model says the same thing is equivalent to its base. The agent and the
// provider keep the live ones.
type minted struct {
	seen map[string]bool
}

func (m *minted) report(ctx context.Context, kind, id string) {
	if id == "" || m.seen[id] {
		return
	}
	if m.seen == nil {
		m.seen = make(map[string]bool)
	}
	m.seen[id] = true
	replay.ReportIDs(ctx, kind, id)
}

// chunk reports the refs of the tool requests of a streamed chunk.
func (m *minted) chunk(ctx context.Context, c *ai.ModelResponseChunk) {
	for _, p := range c.Content {
		if p != nil && p.IsToolRequest() && p.ToolRequest != nil {
			m.report(ctx, "call", p.ToolRequest.Ref)
		}
	}
}

// answer reports the refs of the tool requests of msg and the ids of
// custom, and gives a tool request without a ref one derived from the
// conversation's length (turn), the request's place in the answer and what
// it asks (stable: a model that answers the same conversation the same way
// yields the same refs, live or replayed). Genkit pairs a tool's response
// with its request by ref, so two requests of one tool in an answer need
// refs to be told apart when their responses come back in the order the
// tools finished.
func (m *minted) answer(ctx context.Context, turn int, msg *ai.Message, custom map[string]any) {
	if msg != nil {
		n := 0
		for _, p := range msg.Content {
			if p == nil || !p.IsToolRequest() || p.ToolRequest == nil {
				continue
			}
			tr := p.ToolRequest
			if tr.Ref == "" {
				in, _ := json.Marshal(tr.Input)
				tr.Ref = stableID(fmt.Sprintf("%d|%d|%s|%s", turn, n, tr.Name, in))
			} else {
				m.report(ctx, "call", tr.Ref)
			}
			n++
		}
	}
	for _, id := range customIDs(custom) {
		m.report(ctx, id.kind, id.id)
	}
}

func stableID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "call_" + hex.EncodeToString(sum[:12])
}

type customID struct{ kind, id string }

// customIDs are the ids the provider minted that a response's custom data
// holds (compat_oai keeps the completion's "id" and "systemFingerprint"
// there), in key order: the string value of every member whose name, once
// lowercased and rid of '-' and '_', is "id" or ends in "requestid",
// "responseid", "messageid" or "completionid" (kind "response"), or holds
// "fingerprint" (kind "fingerprint": the provider's configuration, which
// changes with its deployments, not with what the model says).
func customIDs(custom map[string]any) []customID {
	var out []customID
	for _, k := range slices.Sorted(maps.Keys(custom)) {
		s, ok := custom[k].(string)
		if !ok || s == "" {
			continue
		}
		n := strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(k))
		switch {
		case n == "id" || strings.HasSuffix(n, "requestid") || strings.HasSuffix(n, "responseid") ||
			strings.HasSuffix(n, "messageid") || strings.HasSuffix(n, "completionid"):
			out = append(out, customID{"response", s})
		case strings.Contains(n, "fingerprint"):
			out = append(out, customID{"fingerprint", s})
		}
	}
	return out
}

// scalarCustom is what the recording keeps of a response's custom data
// (ModelResponse.Custom): the members of its JSON object whose values are
// strings, numbers or booleans — compat_oai's completion "id", "model" and
// "systemFingerprint" — or nil when none is left. Structured members are
// left out: Gemini keeps its raw candidates and usage metadata there, which
// repeat the message and the usage, with log probabilities that differ on
// every call of the same answer.
func scalarCustom(c any) map[string]any {
	if c == nil {
		return nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(b, &members) != nil {
		return nil
	}
	var out map[string]any
	for k, raw := range members {
		if len(raw) == 0 || raw[0] == '{' || raw[0] == '[' || raw[0] == 'n' {
			continue
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		if out == nil {
			out = make(map[string]any)
		}
		out[k] = v
	}
	return out
}
