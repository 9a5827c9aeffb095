package otel

import (
	"context"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	sftrace "github.com/stepfork/stepfork/trace"
)

// Fork runs fork.Run(ctx, base, at, agent, opts...) under a fork span, with o
// observing the run: the span "fork {agent}" carries the fork's run id
// (stepfork.fork.run_id), the base run id, the fork point as asked and as
// resolved (stepfork.fork.point, stepfork.fork.point_step), the changes in
// their wire form (stepfork.fork.changes, redacted) and the variant's status;
// the run's invoke_agent span and the tail's chat and execute_tool spans nest
// under it. When the fork's run starts, o logs "stepfork fork started" at
// level Info with the same fields and the span's trace and span ids.
func (o *Observer) Fork(ctx context.Context, base *sftrace.Trace, at fork.At, agent replay.Agent, opts ...fork.RunOption) (*fork.Variant, error) {
	var changes []sftrace.Value
	for _, opt := range opts {
		if c, ok := opt.(fork.Change); ok {
			changes = append(changes, c.Wire())
		}
	}
	wire, _ := sftrace.ArrayValue(changes...)
	wire, _ = sftrace.RedactValue(wire)
	point := "default"
	if at != nil {
		point = at.String()
	}
	agentName := ""
	baseRunID := ""
	if base != nil {
		agentName, baseRunID = base.AgentName, base.RunID
	}
	ctx, span := o.tracer.Start(ctx, "fork "+agentName, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrRunKind.String(KindCounterfactual), AttrForkBaseRun.String(baseRunID),
			AttrForkPoint.String(point), AttrForkChanges.String(string(wire.Bytes()))))
	defer span.End()
	f := &pendingFork{span: span, base: baseRunID, point: point, changes: string(wire.Bytes())}
	ctx = context.WithValue(ctx, forkKey{}, f)

	v, err := fork.Run(o.Context(ctx), base, at, agent, opts...)
	if v != nil {
		attrs := []attribute.KeyValue{AttrForkStatus.String(string(v.Status)), AttrForkStep.Int(v.At.Step),
			attribute.String("stepfork.fork.point_description", v.At.Description),
			attribute.Float64("stepfork.fork.incurred_cost_usd", v.IncurredCost),
			attribute.Int64("stepfork.fork.incurred_tokens", v.IncurredTokens),
			attribute.Int("stepfork.fork.suppressed", len(v.Suppressed))}
		if v.Trace != nil {
			attrs = append(attrs, AttrForkRunID.String(v.Trace.RunID))
		}
		span.SetAttributes(attrs...)
		for _, s := range v.Suppressed {
			span.AddEvent("stepfork.effect_suppressed", trace.WithAttributes(
				AttrCallKind.String(string(s.Kind)), attribute.String("stepfork.call.label", s.Tool), attribute.Int("stepfork.step", s.Step)))
		}
	}
	if err != nil {
		msg, _ := sftrace.RedactString(err.Error())
		span.SetStatus(codes.Error, msg)
		span.SetAttributes(attrErrorType.String(errorType(err)))
	}
	return v, err
}

type forkKey struct{}

// pendingFork is a fork started by Observer.Fork whose run has not started.
type pendingFork struct {
	span                 trace.Span
	base, point, changes string
	once                 sync.Once
}

func forkFrom(ctx context.Context) *pendingFork {
	f, _ := ctx.Value(forkKey{}).(*pendingFork)
	return f
}

// started names the fork's span after its run and logs the fork's start.
func (f *pendingFork) started(ctx context.Context, o *Observer, r *replay.RunInfo) {
	f.span.SetAttributes(AttrForkRunID.String(r.RunID))
	f.once.Do(func() {
		sc := f.span.SpanContext()
		o.log.LogAttrs(ctx, slog.LevelInfo, "stepfork fork started",
			slog.String("run_id", r.RunID), slog.String("base_run_id", f.base),
			slog.String("agent", r.AgentName), slog.String("fork_point", f.point),
			slog.String("changes", f.changes), slog.String("run_kind", KindCounterfactual),
			slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	})
}
