package otel

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/stepfork/stepfork/replay"
	sftrace "github.com/stepfork/stepfork/trace"
)

// ScopeName is the instrumentation scope of the tracer and meter an
// [Observer] uses.
const ScopeName = "github.com/stepfork/stepfork/contrib/otel"

// Run kinds, the values of the stepfork.run.kind attribute on every span and
// measurement: what the traffic of a run is.
const (
	// KindPrimary is a run recorded with replay.Record: the agent doing its
	// real work.
	KindPrimary = "primary"
	// KindCounterfactual is a fork's run (fork.Run, fork.Each): the
	// prefix served from a recording, the tail run under changes.
	KindCounterfactual = "counterfactual"
	// KindReplay is a replay of a recording without a fork (replay.Replay).
	KindReplay = "replay"
)

// Attribute keys this package sets besides the GenAI semantic conventions'.
const (
	AttrRunKind     = attribute.Key("stepfork.run.kind")
	AttrRunID       = attribute.Key("stepfork.run.id")
	AttrBaseRunID   = attribute.Key("stepfork.base_run.id")
	AttrReplayMode  = attribute.Key("stepfork.replay.mode")
	AttrOutcome     = attribute.Key("stepfork.call.outcome")
	AttrCallKind    = attribute.Key("stepfork.call.kind")
	AttrForkRunID   = attribute.Key("stepfork.fork.run_id")
	AttrForkBaseRun = attribute.Key("stepfork.fork.base_run_id")
	AttrForkPoint   = attribute.Key("stepfork.fork.point")
	AttrForkStep    = attribute.Key("stepfork.fork.point_step")
	AttrForkChanges = attribute.Key("stepfork.fork.changes")
	AttrForkStatus  = attribute.Key("stepfork.fork.status")
)

// GenAI semantic convention keys.
const (
	attrOperation    = attribute.Key("gen_ai.operation.name")
	attrProvider     = attribute.Key("gen_ai.provider.name")
	attrAgentName    = attribute.Key("gen_ai.agent.name")
	attrRequestModel = attribute.Key("gen_ai.request.model")
	attrToolName     = attribute.Key("gen_ai.tool.name")
	attrInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	attrTokenType    = attribute.Key("gen_ai.token.type")
	attrErrorType    = attribute.Key("error.type")
)

// Observer traces, counts and logs stepfork runs as they happen, through the
// caller's TracerProvider, MeterProvider and slog.Logger. It implements
// [replay.Observer]: install it with [Observer.Context] (or
// replay.WithObserver) in the context given to replay.Record, replay.Replay or
// fork.Run, or run a fork with [Observer.Fork] to get a fork span as well.
//
// Each run is an "invoke_agent {agent}" span; each executed model call a
// "chat {model}" span and each executed tool call an "execute_tool {tool}"
// span under it, with the GenAI semantic conventions' attributes (operation,
// provider, request model, token usage, tool name, error.type). Calls served
// from a recording did not happen and get no span; they are counted. Every
// span and measurement carries stepfork.run.kind ([KindPrimary],
// [KindCounterfactual], [KindReplay]), so a fork's traffic never passes for
// the traffic it imitates.
//
// Metrics: gen_ai.client.token.usage and gen_ai.client.operation.duration
// (the conventions' histograms, for executed model calls),
// stepfork.calls (a counter of dependency calls by kind and outcome) and
// stepfork.runs (a counter of runs by status).
type Observer struct {
	tracer trace.Tracer
	log    *slog.Logger

	tokens   metric.Int64Histogram
	duration metric.Float64Histogram
	calls    metric.Int64Counter
	runs     metric.Int64Counter
}

var _ replay.Observer = (*Observer)(nil)

// An Option configures [New].
type Option interface{ apply(*config) }

type config struct {
	tp  trace.TracerProvider
	mp  metric.MeterProvider
	log *slog.Logger
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithTracerProvider sets the TracerProvider spans are made with (default:
// the global one, otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets the MeterProvider measurements are made with
// (default: the global one, otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithLogger sets the logger of the fork lines (default: slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.log = l })
}

// New returns an Observer using the providers and logger of opts. It fails
// only when the MeterProvider refuses an instrument.
func New(opts ...Option) (*Observer, error) {
	cfg := config{}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.log == nil {
		cfg.log = slog.Default()
	}
	meter := cfg.mp.Meter(ScopeName)
	o := &Observer{tracer: cfg.tp.Tracer(ScopeName), log: cfg.log}
	var errs [4]error
	o.tokens, errs[0] = meter.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used."),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864))
	o.duration, errs[1] = meter.Float64Histogram("gen_ai.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("GenAI operation duration."),
		metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92))
	o.calls, errs[2] = meter.Int64Counter("stepfork.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Dependency calls (tool and model) of stepfork runs, by kind and outcome."))
	o.runs, errs[3] = meter.Int64Counter("stepfork.runs", metric.WithUnit("{run}"),
		metric.WithDescription("Runs recorded, replayed or forked, by kind and status."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return o, nil
}

// Context returns ctx with o installed as the [replay.Observer] of the
// sessions started with it.
func (o *Observer) Context(ctx context.Context) context.Context {
	return replay.WithObserver(ctx, o)
}

// runKind names the kind of a session's run.
func runKind(r *replay.RunInfo) string {
	switch {
	case r.Directed:
		return KindCounterfactual
	case r.BaseRunID != "":
		return KindReplay
	}
	return KindPrimary
}

type runKey struct{}

// runState is what a run's context carries for its calls.
type runState struct {
	kind  string
	runID string
}

type callKey struct{}

// callState is an executed call's span and start.
type callState struct {
	span  trace.Span
	start time.Time
}

// StartRun starts the run's invoke_agent span (under the fork span when the
// run is a fork's started by [Observer.Fork]) and logs a fork's start.
func (o *Observer) StartRun(ctx context.Context, r *replay.RunInfo) context.Context {
	kind := runKind(r)
	attrs := []attribute.KeyValue{
		attrOperation.String("invoke_agent"), attrAgentName.String(r.AgentName),
		AttrRunKind.String(kind), AttrRunID.String(r.RunID),
	}
	if r.BaseRunID != "" {
		attrs = append(attrs, AttrBaseRunID.String(r.BaseRunID), AttrReplayMode.String(string(r.Mode)))
	}
	if f := forkFrom(ctx); f != nil && r.Directed {
		f.started(ctx, o, r)
	}
	ctx, _ = o.tracer.Start(ctx, "invoke_agent "+r.AgentName, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
	return context.WithValue(ctx, runKey{}, &runState{kind: kind, runID: r.RunID})
}

// EndRun ends the run's span with the run's status and counts the run.
func (o *Observer) EndRun(ctx context.Context, r *replay.RunInfo, res *replay.Result) {
	span := trace.SpanFromContext(ctx)
	status := "completed"
	if res != nil && res.Trace != nil {
		status = string(res.Trace.Status)
	}
	var err error
	if res != nil {
		err = res.Err
	}
	if err != nil {
		span.SetStatus(codes.Error, redacted(err))
		span.SetAttributes(attrErrorType.String(errorType(err)))
	}
	span.SetAttributes(attribute.String("stepfork.run.status", status))
	span.End()
	o.runs.Add(ctx, 1, metric.WithAttributes(AttrRunKind.String(runKind(r)), attribute.String("stepfork.run.status", status)))
}

// StartCall starts the span of an executed call; a call that does not
// execute gets none (a blocked or refused one is an event on the run's span).
func (o *Observer) StartCall(ctx context.Context, c *replay.CallInfo) context.Context {
	if c.Outcome != replay.Executed {
		return ctx
	}
	kind := kindOf(ctx)
	var name string
	attrs := []attribute.KeyValue{AttrRunKind.String(kind)}
	sk := trace.SpanKindInternal
	if c.Kind == replay.KindLLM {
		name = "chat " + c.Model
		sk = trace.SpanKindClient
		attrs = append(attrs, attrOperation.String("chat"), attrProvider.String(providerName(c.Provider)),
			attrRequestModel.String(c.Model))
	} else {
		name = "execute_tool " + c.Label
		attrs = append(attrs, attrOperation.String("execute_tool"), attrToolName.String(c.Label))
	}
	ctx, span := o.tracer.Start(ctx, name, trace.WithSpanKind(sk), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, callKey{}, &callState{span: span, start: time.Now()})
}

// EndCall ends an executed call's span with its usage or error, records the
// GenAI metrics of an executed model call, and counts every call.
func (o *Observer) EndCall(ctx context.Context, c *replay.CallInfo) {
	kind := kindOf(ctx)
	o.calls.Add(ctx, 1, metric.WithAttributes(AttrRunKind.String(kind), AttrCallKind.String(string(c.Kind)),
		AttrOutcome.String(string(c.Outcome))))
	cs, _ := ctx.Value(callKey{}).(*callState)
	if c.Outcome != replay.Executed || cs == nil {
		if c.Outcome == replay.Blocked || c.Outcome == replay.Failed {
			attrs := []attribute.KeyValue{AttrCallKind.String(string(c.Kind)), attribute.String("stepfork.call.label", c.Label)}
			if c.Err != nil {
				attrs = append(attrs, attrErrorType.String(errorType(c.Err)))
			}
			trace.SpanFromContext(ctx).AddEvent("stepfork.call."+string(c.Outcome), trace.WithAttributes(attrs...))
		}
		return
	}
	span := cs.span
	var errType string
	if c.Err != nil {
		errType = errorType(c.Err)
		span.SetStatus(codes.Error, redacted(c.Err))
		span.SetAttributes(attrErrorType.String(errType))
	}
	if c.Kind == replay.KindLLM {
		if c.Usage.PromptTokens > 0 || c.Usage.CompletionTokens > 0 {
			span.SetAttributes(attrInputTokens.Int64(c.Usage.PromptTokens), attrOutputTokens.Int64(c.Usage.CompletionTokens))
		}
		if c.Usage.CostUSD > 0 {
			span.SetAttributes(attribute.Float64("stepfork.cost_usd", c.Usage.CostUSD))
		}
		base := []attribute.KeyValue{AttrRunKind.String(kind), attrOperation.String("chat"),
			attrProvider.String(providerName(c.Provider)), attrRequestModel.String(c.Model)}
		d := base
		if errType != "" {
			d = append(d[:len(d):len(d)], attrErrorType.String(errType))
		}
		o.duration.Record(ctx, time.Since(cs.start).Seconds(), metric.WithAttributes(d...))
		if c.Usage.PromptTokens > 0 {
			o.tokens.Record(ctx, c.Usage.PromptTokens, metric.WithAttributes(append(base[:len(base):len(base)], attrTokenType.String("input"))...))
		}
		if c.Usage.CompletionTokens > 0 {
			o.tokens.Record(ctx, c.Usage.CompletionTokens, metric.WithAttributes(append(base[:len(base):len(base)], attrTokenType.String("output"))...))
		}
	}
	span.End()
}

func kindOf(ctx context.Context) string {
	if rs, ok := ctx.Value(runKey{}).(*runState); ok {
		return rs.kind
	}
	return KindPrimary
}

// providerName maps stepfork's provider names to the values
// gen_ai.provider.name defines; others pass unchanged.
func providerName(p string) string {
	switch p {
	case "azure":
		return "azure.ai.openai"
	case "google":
		return "gcp.gen_ai"
	case "mistral":
		return "mistral_ai"
	case "xai":
		return "x_ai"
	case "":
		return "unknown"
	}
	return p
}

// redacted is err's text with secrets redacted, as everything stepfork
// writes.
func redacted(err error) string {
	s, _ := sftrace.RedactString(err.Error())
	return s
}

// errorType is the error.type of err: its ErrorType() when it has one (the
// recorded type of a served failure, "Blocked", a transport error's type),
// else "_OTHER" as the conventions ask.
func errorType(err error) string {
	var typed interface{ ErrorType() string }
	if errors.As(err, &typed) && typed.ErrorType() != "" {
		return typed.ErrorType()
	}
	return "_OTHER"
}
