// Package eino records and replays the components of an Eino application
// (github.com/cloudwego/eino): chat models and tools, wherever a graph,
// chain or agent calls them, so that its runs can be replayed and forked by
// packages replay and fork.
//
// Wrap the components where the application builds its graph:
//
//	chat := sfeino.Model("openai", "gpt-4o", openaiModel) // a model.ToolCallingChatModel
//	agent, err := react.NewAgent(ctx, &react.AgentConfig{
//		ToolCallingModel: chat,
//		ToolsConfig:      compose.ToolsNodeConfig{Tools: sfeino.Tools(search, book)},
//	})
//
// A model call's recorded request is OpenAI-shaped — "model", "messages"
// (schema.Message values), the common model.Option values ("temperature",
// "max_tokens", "top_p", "stop", "tool_choice"), "tools" (each
// schema.ToolInfo with its parameters as JSON Schema), "stream", and the
// implementation-specific options by type — so fork.Prompt, fork.Temperature
// and fork.Model patch it as they patch an OpenAI request, and the patched
// request is what the model is called with. The response is the
// schema.Message; a stream is recorded chunk by chunk and served back as a
// schema.StreamReader. Token usage comes from the response's
// ResponseMeta.Usage.
//
// A tool call is recorded under the tool's name with its arguments as input
// and its result as output.
//
// An eino-ext model that speaks HTTP (the OpenAI or Claude model) can
// instead be recorded at the wire, by giving it an http.Client whose
// transport is replay.Transport; see the package's tests.
package eino
