// Command triage runs the refund-triage agent once against the
// OpenAI-compatible endpoint of the environment and records the run as a
// stepfork trace, ready to replay and fork in a test.
//
//	OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.2 \
//	    go run ./refund/cmd/triage -order o_1842 "My blender arrived with a cracked jar."
//
// OPENAI_API_KEY is sent to the endpoint and never recorded. Refunds are
// confirmed on the terminal, and paid into REFUND_LEDGER (default
// refund-ledger.tsv). The trace is saved to -o (default
// .stepfork/traces/refund-triage-<run id>.sftrace).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/stepfork/stepfork/examples/refund"
	"github.com/stepfork/stepfork/replay"
)

func main() {
	order := flag.String("order", "o_1842", "order id (demo orders: o_0950, o_1001, o_1842, o_2210)")
	out := flag.String("o", "", "where to save the trace (default .stepfork/traces/…)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: triage [-order ID] [-o PATH] MESSAGE\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	cfg := refund.ConfigFromEnv()
	cfg.Approver = askOnTerminal
	agent := refund.New(cfg)
	rec, err := replay.Record(ctx, "refund-triage", refund.Request{OrderID: *order, Message: flag.Arg(0)}, agent.Run,
		replay.SaveTo(*out))
	if rec != nil && rec.Output != nil {
		b, _ := json.MarshalIndent(rec.Output, "", "  ")
		fmt.Println(string(b))
	}
	if rec != nil && rec.Path != "" {
		fmt.Fprintln(os.Stderr, "trace:", rec.Path)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "triage: recording failed:", err)
		os.Exit(1)
	}
	if rec.Err != nil {
		fmt.Fprintln(os.Stderr, "triage:", rec.Err)
		os.Exit(1)
	}
}

// askOnTerminal asks the person at the terminal to confirm a refund.
func askOnTerminal(_ context.Context, p refund.Proposal) (refund.Approval, error) {
	fmt.Fprintf(os.Stderr, "Pay a refund of %.2f USD to %s for order %s (%s)? [y/N] ", p.Amount, p.Customer, p.OrderID, p.Reason)
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		return refund.Approval{Approved: false, Note: "no answer on the terminal"}, nil
	}
	ok := strings.EqualFold(strings.TrimSpace(line), "y") || strings.EqualFold(strings.TrimSpace(line), "yes")
	return refund.Approval{Approved: ok, By: "terminal"}, nil
}
