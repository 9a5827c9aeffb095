package otel_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	sfotel "github.com/stepfork/stepfork/contrib/otel"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
)

// A fork traced through the application's TracerProvider: the fork span
// and, under it, the run's invoke_agent span. Calls that do not execute (the
// served prefix, the substituted result) get no span.
func ExampleObserver_Fork() {
	spans := tracetest.NewInMemoryExporter()
	obs, _ := sfotel.New(
		sfotel.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))),
		sfotel.WithMeterProvider(sdkmetric.NewMeterProvider()),
		sfotel.WithLogger(slog.New(slog.DiscardHandler)))

	quote := replay.Tool("quote", func(ctx context.Context, city string) (int, error) { return len(city) * 100, nil })
	agent := replay.Typed(func(ctx context.Context, cities []string) (int, error) {
		total := 0
		for _, c := range cities {
			q, err := quote(ctx, c)
			if err != nil {
				return 0, err
			}
			total += q
		}
		return total, nil
	})
	ctx := context.Background()
	rec, _ := replay.Record(ctx, "quotes", []string{"Lhasa", "Kathmandu"}, agent)

	// The tail is the second quote, whose result the fork substitutes.
	v, _ := obs.Fork(ctx, rec.Trace, fork.BeforeCall(replay.KindTool, "quote", 2), agent,
		fork.ToolResult(fork.OnCall("quote", 2), 50))
	for _, s := range spans.GetSpans() {
		fmt.Println(s.Name)
	}
	fmt.Println("output:", v.Output, "—", strings.Count(fmt.Sprint(spans.GetSpans()), "counterfactual") > 0)
	// Output:
	// invoke_agent quotes
	// fork quotes
	// output: 550 — true
}
