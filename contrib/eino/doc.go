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
// ResponseMeta.Usage; it is cost, not behavior (a diff leaves it out of
// the model step, in the response and in the messages of later requests
// that repeat it).
//
// Provider-minted ids are bound, not compared: the tool-call ids of an
// answer are replaced by ids derived from the conversation, and the ids the
// provider minted that a message carries in its Extra (eino-ext's OpenAI
// model copies the response id there as "openai-request-id") are reported
// with replay.ReportIDs. When a fork's tail runs the model live, each such
// id is bound to the one the recorded answer had, and the run records the
// recorded one wherever the live one appears (the answer, the next
// request's messages): a tail whose model says the same thing is
// equivalent to its base, and goldens show the ids as placeholders.
//
// A tool call is recorded under the tool's name with its arguments as input
// and its result as output.
//
// An eino-ext model that speaks HTTP (the OpenAI or Claude model) can
// instead be recorded at the wire, by giving it an http.Client whose
// transport is replay.Transport; see the package's tests.
package eino
