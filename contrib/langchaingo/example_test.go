package langchaingo_test

import (
	"context"
	"fmt"

	sflcg "github.com/stepfork/stepfork/contrib/langchaingo"
	"github.com/stepfork/stepfork/replay"
	"github.com/tmc/langchaingo/tools"
)

// A wrapped tool is recorded under its name and served on replay.
func ExampleTool() {
	var calls int
	clock := sflcg.Tool(clockTool{&calls})
	agent := replay.Typed(func(ctx context.Context, city string) (string, error) {
		return clock.Call(ctx, city)
	})
	ctx := context.Background()
	rec, _ := replay.Record(ctx, "clock", "Kathmandu", agent)
	res, _ := replay.Replay(ctx, rec.Trace, agent)
	fmt.Println(res.Output, "— tool ran", calls, "time(s); recorded as", rec.Trace.Events[1].Name)
	// Output: 09:15 in Kathmandu — tool ran 1 time(s); recorded as local_time
}

type clockTool struct{ calls *int }

var _ tools.Tool = clockTool{}

func (clockTool) Name() string        { return "local_time" }
func (clockTool) Description() string { return "The local time in a city." }
func (c clockTool) Call(_ context.Context, city string) (string, error) {
	*c.calls++
	return "09:15 in " + city, nil
}
