package eino

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/cloudwego/eino/schema"
)

// stableIDs replaces the tool-call ids a model minted in msg with ids
// derived from the conversation's length, the call's place in the answer and
// what it calls, so that a model answering the same conversation the same
// way yields the same ids, live or replayed, and a fork's live tail whose
// model says the same thing is equivalent to its base. The agent sends the
// ids back with the tool results as usual; stateless chat APIs only pair
// them within the conversation.
func stableIDs(turn int, msg *schema.Message) {
	if msg == nil {
		return
	}
	for i := range msg.ToolCalls {
		tc := &msg.ToolCalls[i]
		if tc.ID == "" {
			continue
		}
		tc.ID = stableID(fmt.Sprintf("%d|%d|%s|%s", turn, i, tc.Function.Name, tc.Function.Arguments))
	}
}

// stableStreamIDs is stableIDs for a stream: the n-th id minted in the
// stream of the turn.
func stableStreamIDs(turn int, chunk *schema.Message, n *int) {
	if chunk == nil {
		return
	}
	for i := range chunk.ToolCalls {
		tc := &chunk.ToolCalls[i]
		if tc.ID == "" {
			continue
		}
		tc.ID = stableID(fmt.Sprintf("%d|stream|%d", turn, *n))
		*n++
	}
}

func stableID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "call_" + hex.EncodeToString(sum[:12])
}
