package providers_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/openai"

	"github.com/stepfork/stepfork/internal/fakeprovider"
	"github.com/stepfork/stepfork/trace"
)

// langchainAgent is the agent on langchaingo's OpenAI client, with a system
// message and a tool.
func langchainAgent(t *testing.T, srv *fakeprovider.Server, hc *http.Client) func(context.Context, trace.Value) (any, error) {
	llm, err := openai.New(openai.WithBaseURL(srv.URL+"/v1"), openai.WithToken("sk-test-SECRET-0123456789"),
		openai.WithHTTPClient(hc), openai.WithModel(model))
	if err != nil {
		t.Fatal(err)
	}
	tools := []llms.Tool{{Type: "function", Function: &llms.FunctionDefinition{Name: "lookup", Description: "Looks the weather up.",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}}}}
	return func(ctx context.Context, _ trace.Value) (any, error) {
		msgs := []llms.MessageContent{
			llms.TextParts(llms.ChatMessageTypeSystem, "Be terse."),
			llms.TextParts(llms.ChatMessageTypeHuman, "weather?"),
		}
		for {
			resp, err := llm.GenerateContent(ctx, msgs, llms.WithTools(tools))
			if err != nil {
				return nil, err
			}
			choice := resp.Choices[0]
			if len(choice.ToolCalls) == 0 {
				return choice.Content, nil
			}
			ai := llms.MessageContent{Role: llms.ChatMessageTypeAI}
			for _, tc := range choice.ToolCalls {
				ai.Parts = append(ai.Parts, tc)
			}
			msgs = append(msgs, ai)
			for _, tc := range choice.ToolCalls {
				out, err := lookup(ctx, "Kathmandu")
				if err != nil {
					return nil, err
				}
				msgs = append(msgs, llms.MessageContent{Role: llms.ChatMessageTypeTool,
					Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: tc.ID, Name: tc.FunctionCall.Name, Content: out}}})
			}
		}
	}
}

func TestLangchaingo(t *testing.T) {
	t.Parallel()
	accept(t, sdkAgent{agent: wrap(langchainAgent), prompt: func(t *testing.T, body map[string]any) string {
		if s := str(t, body, "messages", 0, "content"); s != "" {
			return s
		}
		return str(t, body, "messages", 0, "content", 0, "text")
	}})
}
