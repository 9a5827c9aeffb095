// Package genkit records and replays the model calls and tool calls of a
// Genkit application (github.com/firebase/genkit/go), wherever Generate,
// a prompt or a flow makes them, so that its runs can be replayed and
// forked by packages replay and fork.
//
// It is built on Genkit's own registry: a recorded model is a model action
// of the same name, a recorded tool a tool action of the same name, so the
// application's Generate calls, prompts and flows stay as they are. Wrap
// the plugin that provides the models, and define the tools through
// [DefineTool]:
//
//	g := genkit.Init(ctx, genkit.WithPlugins(sfgenkit.Plugin(&openai.OpenAI{}, sfgenkit.WithPrices(prices))))
//	weather := sfgenkit.DefineTool(g, "weather", "The weather in a city.", weatherFn)
//	resp, err := genkit.Generate(ctx, g, ai.WithModelName("openai/gpt-4o"), ai.WithPrompt(q), ai.WithTools(weather))
//
// [Plugin] records every model and tool a plugin provides; [Model] records
// a model made with ai.NewModel, and [Tool] a tool made with ai.NewTool (or
// handed over by a library, such as the tools of an MCP server).
//
// A model call is recorded under the model's Genkit name ("openai/gpt-4o"
// is provider "openai", model "gpt-4o") with Genkit's ModelRequest as its
// request, so that fork.Prompt and its edits reach the system message,
// fork.Temperature the config's temperature and fork.Model another model
// of the registry; the response is the answer, its finish reason and its
// usage, which gives the call its tokens and, with [WithPrices], its cost.
// The ids the provider mints (tool requests' refs, the completion id) are
// bound to the recorded ones with replay.ReportIDs, so a live tail whose
// model says the same thing is equivalent to its base.
// A streamed call is recorded chunk by chunk and served back through
// Genkit's streaming callback. See [Model] for the recorded shapes.
//
// A tool call is recorded under the tool's name with its input and output
// as JSON. Genkit runs the tools of one answer on goroutines; replay
// matches them by name and input in any order. Genkit asks the model
// again once every tool of the answer has returned, so a fork may start
// at any model call, between two turns of tools, with the turns before it
// served as recorded; between the tools of one answer it is refused (their
// order is not behavior). A tool's interrupt is recorded and raised again
// on replay (see [DefineTool]).
//
// A model the application defines through a plugin's own DefineModel
// method, which registers it directly, is not seen by [Plugin]; a plugin
// that speaks HTTP through a client it lets the application give can
// instead be recorded at the wire, with an http.Client whose transport is
// replay.Transport.
package genkit
