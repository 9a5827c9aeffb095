package sftest_test

import (
	"context"
	"testing"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

// triageAgentForDocs stands for the agent under test.
var triageAgentForDocs replay.Agent = func(context.Context, trace.Value) (any, error) { return nil, nil }

// A table of corpus tests after the agent changed, each declaring what
// changed: the prompt of the node "decide" was edited (stated as the fork
// change it amounts to), and the requests of the "reply" model carry a
// date in their system prompt that is code, not behaviour. A bundle that
// changed only there is "intended"; one whose behaviour changed fails its
// subtest with its first behavioural divergence. go test -stepfork.heal=.
// then re-records the changed bundles from where they depart from their
// recordings, at the cost of the tails.
func ExampleIntended() {
	tests := []struct {
		name     string
		corpus   string
		intended []fork.Change
	}{
		{"refunds", "testdata/corpus/refunds", []fork.Change{fork.Prompt("decide", "Decide: refund or escalate. Escalate refunds above 50.")}},
		{"replies", "testdata/corpus/replies", []fork.Change{fork.CodeFields("reply", "messages[0].content")}},
	}
	testCorpora := func(t *testing.T) { // func TestCorpora(t *testing.T) in a _test.go file
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				sftest.Corpus(t, tt.corpus, triageAgentForDocs,
					sftest.Intended(tt.intended...),
					sftest.ForkOptions(fork.Allow("escalate")))
			})
		}
	}
	_ = testCorpora
}
