package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/stepfork/stepfork/trace"
)

// Tool wraps a tool function so that its calls are recorded and replayed. The
// returned function has fn's signature; call it wherever fn was called.
//
// With no session in the context it calls fn directly (no allocation). While
// recording, the input is recorded as JSON in a tool_call event, fn runs with
// a context whose calls nest under it, and its output (or error) is recorded
// in the tool_result. On replay the recorded output is decoded into Out and
// returned without calling fn (ModeFrozen), or fn runs (ModeLive, when the
// tool is allowed), after the call was matched with the recording. A recorded
// failure comes back as a *RecordedError.
//
// The agent sees the same Go values whether a call ran or was served: with
// a session, what fn returns reaches the agent as the recording keeps it,
// its JSON decoded into Out, exactly as a replay serves it. So a []string
// that fn puts in a map[string]any comes back as a []any live too, a
// time.Time without its monotonic reading, a json.RawMessage compacted,
// and a field that JSON leaves out as its zero value. (An Out whose values
// survive JSON unchanged, such as a struct of exported strings, numbers and
// slices of them, is handed back as fn returned it, without decoding.) An
// output whose JSON does not decode into Out (an interface field other
// than any, say) is an error matching ErrNotRecordable, recorded as the
// call's failure: a replay could not serve it. Redaction is the exception:
// a live call's result reaches the agent unredacted, while the recording,
// and so what a replay serves, holds "[REDACTED]" in place of a secret.
func Tool[In, Out any](name string, fn func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		sc := fromContext(ctx)
		if sc == nil {
			if activeSessions.Load() != 0 {
				if err := sessionless("Tool", "tool", name); err != nil {
					var zero Out
					return zero, err
				}
			}
			return fn(ctx, in)
		}
		return callTool(ctx, sc, name, fn, in)
	}
}

func callTool[In, Out any](ctx context.Context, sc *scope, name string, fn func(context.Context, In) (Out, error), in In) (Out, error) {
	var zero Out
	if name == "" {
		return zero, errors.New("replay.Tool: the tool name is empty; name every tool so that it can be matched on replay")
	}
	raw, err := sc.s.valueOf(in)
	if err != nil {
		return zero, fmt.Errorf("replay: tool '%s': the input cannot be recorded: %w", name, err)
	}
	var live Out
	ic := intercept{kind: KindTool, name: name}
	out, served, err := sc.s.dependency(ctx, sc, &ic, raw, func(ctx context.Context, input trace.Value, _ string, patched bool) (trace.Value, error) {
		arg := in
		if patched {
			p, err := decodeValue[In](input)
			if err != nil {
				return trace.Value{}, fmt.Errorf("replay: tool '%s': the patched input %s does not decode into %T: %w", name, preview(input), p, err)
			}
			arg = p
		}
		o, err := fn(ctx, arg)
		if err != nil {
			return trace.Value{}, err
		}
		v, err := valueOf(o)
		if err == nil {
			live, err = asRecorded(o, v)
		}
		if err != nil {
			return trace.Value{}, fmt.Errorf("replay: tool '%s': the output cannot be recorded: %w", name, err)
		}
		return v, nil
	})
	if err != nil {
		return zero, err
	}
	if !served {
		return live, nil
	}
	return decodeServed[Out](sc, KindTool, name, out)
}

// decodeServed decodes a served output into T; a failure is a divergence
// (the agent's types no longer fit the recording).
func decodeServed[T any](sc *scope, kind CallKind, label string, v trace.Value) (T, error) {
	var out T
	if v.IsAbsent() || v.IsNull() {
		return out, nil
	}
	out, err := decodeValue[T](v)
	if err != nil {
		e := &MismatchError{Kind: kind, Label: label, Step: -1,
			msg: fmt.Sprintf("recorded output of %s '%s' does not decode into %T: %v", kind, label, out, err)}
		sc.s.mu.Lock()
		sc.s.noteLocked(e)
		sc.s.mu.Unlock()
		return out, e
	}
	return out, nil
}
