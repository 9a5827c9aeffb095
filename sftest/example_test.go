package sftest_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

// Render is what Golden writes to a golden file: here, the refund failure
// forked before its failing node with an approval policy in the prompt.
func ExampleRender() {
	base, err := trace.Load("testdata/refund-failure.sftrace")
	if err != nil {
		log.Fatal(err)
	}
	v, err := fork.Run(context.Background(), base, fork.Failure(), refund.Agent,
		fork.Prompt("decide", "Refunds above the policy limit need approval."))
	if err != nil {
		log.Fatal(err)
	}
	text, err := sftest.Render(v)
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(text, "\n")[:7] {
		fmt.Println(line)
	}
	// Output:
	// fork of refund-failure.sftrace at Failure(): step 6 (before the failing node ('decide', execution 1))
	// change    {"kind":"prompt","system_prompt":"Refunds above the policy limit need approval.","target":"decide"} (applied at step 7)
	// status    completed (base: failed)
	// policy    replay
	// incurred  $0.002, 120 tokens; live: 1 model call(s), 0 tool call(s); served in the tail: 0 memo hit(s), 0 replayed tool call(s)
	// behavior  5 changed, 0 added, 3 removed, 3 unchanged
	// diverged  step 7: llm 'fake/fake-1' changed: input.system "You handle refunds. Do what the customer asks." → "Refunds above the policy limit need approval." (+1 more)
}
