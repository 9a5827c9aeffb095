package eino

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/cloudwego/eino/schema"
	"github.com/stepfork/stepfork/replay"
)

// reportIDs reports to the session (replay.ReportIDs) the ids the provider
// minted that msg carries in its Extra: the value of every key that names a
// request, response or message id ("openai-request-id", the chat
// completion's id that eino-ext's OpenAI model copies there), as a
// "response" id. seen, when not nil, keeps a stream from reporting the id
// every chunk repeats more than once.
func reportIDs(ctx context.Context, msg *schema.Message, seen map[string]bool) {
	if msg == nil || len(msg.Extra) == 0 {
		return
	}
	keys := make([]string, 0, len(msg.Extra))
	for k := range msg.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys) // one order, whatever the map's
	for _, k := range keys {
		if !mintedKey(k) {
			continue
		}
		v := reflect.ValueOf(msg.Extra[k])
		if !v.IsValid() || v.Kind() != reflect.String || v.String() == "" || seen[v.String()] {
			continue
		}
		if seen != nil {
			seen[v.String()] = true
		}
		replay.ReportIDs(ctx, "response", v.String())
	}
}

// mintedKey reports whether an Extra key names an id a provider minted:
// once lowercased and rid of '-' and '_', it ends in "requestid",
// "responseid" or "messageid".
func mintedKey(k string) bool {
	k = strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(k))
	return strings.HasSuffix(k, "requestid") || strings.HasSuffix(k, "responseid") || strings.HasSuffix(k, "messageid")
}

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
