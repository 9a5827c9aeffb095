package eino

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/schema"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// InvokableTool is an Eino tool whose runs are recorded and replayed as
// tool calls named after the tool (its [schema.ToolInfo] name), so that
// assertions, fork targets and the side-effect guard (fork.Allow) name it as
// the model does.
type InvokableTool struct {
	inner tool.InvokableTool

	once sync.Once
	info *schema.ToolInfo
	err  error
}

var _ tool.InvokableTool = (*InvokableTool)(nil)

// Tool wraps t.
func Tool(t tool.InvokableTool) *InvokableTool { return &InvokableTool{inner: t} }

// Tools wraps each of ts, for a compose.ToolsNodeConfig.
func Tools(ts ...tool.InvokableTool) []tool.BaseTool {
	out := make([]tool.BaseTool, len(ts))
	for i, t := range ts {
		out[i] = Tool(t)
	}
	return out
}

// Info returns the wrapped tool's info (asked once).
func (t *InvokableTool) Info(ctx context.Context) (*schema.ToolInfo, error) {
	t.once.Do(func() { t.info, t.err = t.inner.Info(ctx) })
	return t.info, t.err
}

// InvokableRun runs the tool, recorded as a tool call whose input is the
// arguments (as JSON when they are JSON, else as a string) and whose output
// is the result string; on replay the recorded result is returned without
// running it. With implementation-specific options the input is
// {"arguments": …, "impl_options": [their types]}, so a run that passes
// other options differs from the recording.
func (t *InvokableTool) InvokableRun(ctx context.Context, argumentsInJSON string, opts ...tool.Option) (string, error) {
	info, err := t.Info(ctx)
	if err != nil {
		return "", err
	}
	if info == nil || info.Name == "" {
		return "", fmt.Errorf("contrib/eino: %T has no name in its ToolInfo; name every tool so it can be matched on replay", t.inner)
	}
	var args any = argumentsInJSON
	if json.Valid([]byte(argumentsInJSON)) {
		args = json.RawMessage(argumentsInJSON)
	}
	var in any = args
	types := implTypes(opts)
	if len(types) > 0 {
		in = map[string]any{"arguments": args, "impl_options": types}
	}
	input, err := valueOf(in)
	if err != nil {
		return "", fmt.Errorf("contrib/eino: tool %q: the arguments cannot be recorded: %w", info.Name, err)
	}
	call := replay.Tool(info.Name, func(ctx context.Context, v trace.Value) (string, error) {
		a := argumentsInJSON
		if v != input { // patched by a fork
			arg := v
			if len(types) > 0 {
				arg = v.Get("arguments")
			}
			if s, ok := arg.Str(); ok {
				a = s
			} else {
				a = string(arg.Bytes())
			}
		}
		return t.inner.InvokableRun(ctx, a, opts...)
	})
	return call(ctx, input)
}
