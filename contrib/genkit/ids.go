package genkit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/firebase/genkit/go/ai"
)

// stableRefs replaces the refs of the tool requests in msg (the tool-call
// ids a provider minted, or none) with refs derived from the conversation's
// length, the request's place in the answer and what it asks, so that a
// model answering the same conversation the same way yields the same refs,
// live or replayed, and a fork's live tail whose model says the same thing
// is equivalent to its base. A ref the stream s already replaced in a chunk
// keeps the ref the chunk got. Genkit sends the refs back with the tool
// responses; stateless chat APIs only pair them within the conversation.
func stableRefs(turn int, msg *ai.Message, s *streamRefs) {
	if msg == nil {
		return
	}
	n := 0
	for _, p := range msg.Content {
		if p == nil || !p.IsToolRequest() || p.ToolRequest == nil {
			continue
		}
		tr := p.ToolRequest
		if r, ok := s.lookup(tr.Ref); ok {
			tr.Ref = r
		} else {
			in, _ := json.Marshal(tr.Input)
			tr.Ref = stableID(fmt.Sprintf("%d|%d|%s|%s", turn, n, tr.Name, in))
		}
		n++
	}
}

// streamRefs replaces the refs minted in the chunks of one streamed answer:
// the n-th ref minted in the stream of the turn gets the n-th stable ref,
// and a ref seen again gets the same one.
type streamRefs struct {
	turn  int
	n     int
	bound map[string]string // minted → stable
}

func (s *streamRefs) chunk(c *ai.ModelResponseChunk) {
	for _, p := range c.Content {
		if p == nil || !p.IsToolRequest() || p.ToolRequest == nil || p.ToolRequest.Ref == "" {
			continue
		}
		tr := p.ToolRequest
		if r, ok := s.bound[tr.Ref]; ok {
			tr.Ref = r
			continue
		}
		if s.bound == nil {
			s.bound = make(map[string]string)
		}
		r := stableID(fmt.Sprintf("%d|stream|%d", s.turn, s.n))
		s.n++
		s.bound[tr.Ref], tr.Ref = r, r
	}
}

func (s *streamRefs) lookup(minted string) (string, bool) {
	if s == nil || minted == "" {
		return "", false
	}
	r, ok := s.bound[minted]
	return r, ok
}

func stableID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "call_" + hex.EncodeToString(sum[:12])
}
