// Package otel makes stepfork runs visible in OpenTelemetry as they happen,
// through the application's own TracerProvider, MeterProvider and slog
// logger: recordings, replays and forks are traced, counted and logged like
// any other agent run, and a fork stays distinguishable from the traffic it
// imitates.
//
//	obs, err := sfotel.New(sfotel.WithTracerProvider(tp), sfotel.WithMeterProvider(mp))
//	…
//	rec, err := replay.Record(obs.Context(ctx), "triage", input, agent)   // primary
//	v, err := obs.Fork(ctx, rec.Trace, fork.Failure(), agent, fork.Prompt("decide", "…"))
//
// Spans follow the GenAI semantic conventions: a run is "invoke_agent
// {agent}", an executed model call "chat {model}", an executed tool call
// "execute_tool {tool}", with gen_ai.operation.name, gen_ai.provider.name,
// gen_ai.request.model, gen_ai.usage.input_tokens and output_tokens,
// gen_ai.tool.name and error.type. [Observer.Fork] adds a "fork {agent}" span
// with the fork's run id, base run id, fork point and changes, under which
// the tail's spans nest, and logs "stepfork fork started". Every span and
// measurement carries stepfork.run.kind: primary, counterfactual or replay.
//
// The seam is replay.Observer: an [Observer] is one, installed in a context
// with [Observer.Context] (or replay.WithObserver).
package otel
