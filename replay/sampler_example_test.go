package replay_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// A service keeps every failed run of its agent and a tenth of the others,
// as bundles for a regression corpus. The agent's answers are returned as if
// nothing recorded them.
func ExampleSampler() {
	dir, _ := os.MkdirTemp("", "runs")
	defer os.RemoveAll(dir)

	agent := replay.Typed(func(ctx context.Context, amount float64) (string, error) {
		if amount > 100 {
			return "", errors.New("above the limit")
		}
		return "refunded", nil
	})
	s := &replay.Sampler{Dir: dir, Keep: replay.FailedPlus(0.1)}
	for i := range 20 {
		amount := float64(10 * i) // 11 to 19 fail
		if _, err := s.Run(context.Background(), "refund", amount, agent); err != nil && i == 19 {
			fmt.Println("request 19:", err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		fmt.Println(err)
	}
	saved, _ := filepath.Glob(filepath.Join(dir, "refund-*.sftrace"))
	fmt.Println("bundles saved:", len(saved))
	// Output:
	// request 19: above the limit
	// bundles saved: 10
}

// A support agent's runs hold customers' e-mail addresses, which no
// credential pattern knows are secret: a scrubber installed on the session
// removes them from everything recorded.
func ExampleScrubbers() {
	emails := trace.ScrubPattern(regexp.MustCompile(`[\w.+-]+@[\w-]+(\.[\w-]+)+`))
	agent := replay.Typed(func(ctx context.Context, email string) (string, error) {
		return "wrote to " + email, nil
	})
	res, err := replay.Record(context.Background(), "support", "dana@example.org", agent, replay.Scrubbers{emails})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Output)
	fmt.Println(res.Trace.Events[0].Input, res.Trace.Events[len(res.Trace.Events)-1].Output)
	fmt.Println(res.Trace.Redactions[0].Reason)
	// Output:
	// wrote to dana@example.org
	// "[REDACTED]" "wrote to [REDACTED]"
	// scrubber
}
