package genkit

import (
	"context"
	"maps"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core"
	"github.com/firebase/genkit/go/core/api"
	"github.com/stepfork/stepfork/replay"
)

// Plugin returns p with every model and tool it provides recorded: the
// models as by [Model], the tools as by [Tool]; its embedders and
// retrievers are recorded as tool calls named after them (input the
// request, output the response), so that a frozen replay reaches none of
// them either. Give it to genkit.Init in
// place of p; the models and tools keep their names, so the agent's
// Generate calls, prompts and flows stay as they are:
//
//	g := genkit.Init(ctx, genkit.WithPlugins(sfgenkit.Plugin(&googlegenai.GoogleAI{})))
//
// Both the actions p returns from Init and those it resolves on demand (a
// dynamic plugin's ResolveAction, which is how most model plugins provide
// the models they do not list) are recorded. A model the application
// defines through a plugin's own DefineModel method is registered by the
// plugin directly and is not seen: record it with [Model] instead, or give
// the plugin's HTTP client replay.Transport.
func Plugin(p api.Plugin, opts ...Option) api.Plugin {
	w := &plugin{inner: p, cfg: newOptions(opts)}
	if dp, ok := p.(api.DynamicPlugin); ok {
		return &dynamicPlugin{plugin: w, dynamic: dp}
	}
	return w
}

type plugin struct {
	inner api.Plugin
	cfg   *options
}

func (p *plugin) Name() string { return p.inner.Name() }

// Init initializes the plugin and returns its actions, models and tools
// recorded.
func (p *plugin) Init(ctx context.Context) []api.Action {
	actions := p.inner.Init(ctx)
	for i, a := range actions {
		actions[i] = p.wrap(a)
	}
	return actions
}

// wrap is a recorded: a model or tool action recorded, any other action as
// it is.
func (p *plugin) wrap(a api.Action) api.Action {
	if a == nil {
		return nil
	}
	switch a.Desc().Type {
	case api.ActionTypeModel:
		if m, ok := a.(ai.Model); ok {
			return newModel(m, p.cfg)
		}
	case api.ActionTypeToolV2, api.ActionTypeTool:
		if _, ok := a.(*toolAction); !ok {
			return toolActionOf(a)
		}
	case api.ActionTypeEmbedder:
		if e, ok := a.(ai.Embedder); ok {
			return recordedAction(a, e.Embed)
		}
	case api.ActionTypeRetriever:
		if r, ok := a.(ai.Retriever); ok {
			return recordedAction(a, r.Retrieve)
		}
	}
	return a
}

// recordedAction is an action of a's name, type, metadata and input schema
// whose runs are tool calls named after it, run recording a's runs
// (embedders and retrievers reach the world as tools do: a frozen replay
// must not call them).
func recordedAction[In, Out any](a api.Action, run func(context.Context, In) (Out, error)) api.Action {
	desc := a.Desc()
	return core.NewAction(desc.Name, desc.Type, maps.Clone(desc.Metadata), desc.InputSchema, replay.Tool(desc.Name, run))
}

type dynamicPlugin struct {
	*plugin
	dynamic api.DynamicPlugin
}

func (p *dynamicPlugin) ListActions(ctx context.Context) []api.ActionDesc {
	return p.dynamic.ListActions(ctx)
}

// ResolveAction resolves the action as the plugin does, recorded.
func (p *dynamicPlugin) ResolveAction(atype api.ActionType, name string) api.Action {
	a := p.dynamic.ResolveAction(atype, name)
	if a == nil {
		return nil
	}
	return p.wrap(a)
}
