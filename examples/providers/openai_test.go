package providers_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"

	"github.com/stepfork/stepfork/internal/fakeprovider"
	"github.com/stepfork/stepfork/trace"
)

func openaiClient(srv *fakeprovider.Server, client *http.Client) openai.Client {
	return openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk-test-SECRET-0123456789"),
		option.WithHTTPClient(client), option.WithMaxRetries(0))
}

var weatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name: "lookup", Description: openai.String("Looks the weather up."),
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}},
})

// chatAgent is the agent on chat completions, streamed (with
// ChatCompletionAccumulator) or not, with a developer prompt.
func chatAgent(stream bool) func(*testing.T, *fakeprovider.Server, *http.Client) func(context.Context, trace.Value) (any, error) {
	return func(_ *testing.T, srv *fakeprovider.Server, hc *http.Client) func(context.Context, trace.Value) (any, error) {
		client := openaiClient(srv, hc)
		complete := func(ctx context.Context, p openai.ChatCompletionNewParams) (openai.ChatCompletionMessage, error) {
			if !stream {
				resp, err := client.Chat.Completions.New(ctx, p)
				if err != nil {
					return openai.ChatCompletionMessage{}, err
				}
				return resp.Choices[0].Message, nil
			}
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			s := client.Chat.Completions.NewStreaming(ctx, p)
			defer s.Close()
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				return openai.ChatCompletionMessage{}, err
			}
			return acc.Choices[0].Message, nil
		}
		return func(ctx context.Context, _ trace.Value) (any, error) {
			p := openai.ChatCompletionNewParams{
				Model:    model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.DeveloperMessage("Be terse."), openai.UserMessage("weather?")},
				Tools:    []openai.ChatCompletionToolUnionParam{weatherTool},
			}
			for {
				msg, err := complete(ctx, p)
				if err != nil {
					return nil, err
				}
				if len(msg.ToolCalls) == 0 {
					return msg.Content, nil
				}
				p.Messages = append(p.Messages, msg.ToParam())
				for _, tc := range msg.ToolCalls {
					out, err := lookup(ctx, "Kathmandu")
					if err != nil {
						return nil, err
					}
					p.Messages = append(p.Messages, openai.ToolMessage(out, tc.ID))
				}
			}
		}
	}
}

func chatPrompt(t *testing.T, body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	n := 0
	for _, m := range msgs {
		if r, _ := m.(map[string]any)["role"].(string); r == "system" || r == "developer" {
			n++
		}
	}
	assert.Equal(t, 1, n, "one instruction message, not a second one prepended")
	assert.Equal(t, "developer", str(t, body, "messages", 0, "role"))
	return str(t, body, "messages", 0, "content")
}

func TestOpenAIChat(t *testing.T) {
	t.Parallel()
	accept(t, sdkAgent{agent: wrap(chatAgent(false)), prompt: chatPrompt})
}

func TestOpenAIChatStream(t *testing.T) {
	t.Parallel()
	accept(t, sdkAgent{agent: wrap(chatAgent(true)), prompt: chatPrompt})
}

// responsesAgent is the agent on the Responses API: instructions, a
// function tool, and the tool's output sent with previous_response_id.
func responsesAgent(stream bool) func(*testing.T, *fakeprovider.Server, *http.Client) func(context.Context, trace.Value) (any, error) {
	return func(_ *testing.T, srv *fakeprovider.Server, hc *http.Client) func(context.Context, trace.Value) (any, error) {
		client := openaiClient(srv, hc)
		create := func(ctx context.Context, p responses.ResponseNewParams) (*responses.Response, error) {
			if !stream {
				return client.Responses.New(ctx, p)
			}
			s := client.Responses.NewStreaming(ctx, p)
			defer s.Close()
			var done *responses.Response
			for s.Next() {
				if ev := s.Current(); ev.Type == "response.completed" {
					r := ev.Response
					done = &r
				}
			}
			return done, s.Err()
		}
		return func(ctx context.Context, _ trace.Value) (any, error) {
			p := responses.ResponseNewParams{
				Model:        model,
				Instructions: openai.String("Be terse."),
				Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("weather?")},
				Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("lookup",
					map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}, false)},
			}
			for {
				resp, err := create(ctx, p)
				if err != nil {
					return nil, err
				}
				var outputs responses.ResponseInputParam
				for _, item := range resp.Output {
					if item.Type != "function_call" {
						continue
					}
					out, err := lookup(ctx, "Kathmandu")
					if err != nil {
						return nil, err
					}
					o := responses.ResponseInputItemParamOfFunctionCallOutput(out)
					o.OfFunctionCallOutput.CallID = openai.String(item.CallID)
					outputs = append(outputs, o)
				}
				if len(outputs) == 0 {
					return resp.OutputText(), nil
				}
				p.PreviousResponseID = openai.String(resp.ID)
				p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
			}
		}
	}
}

func responsesPrompt(t *testing.T, body map[string]any) string {
	assert.NotContains(t, body, "system", "the Responses API answers 400 to a 'system' parameter")
	return str(t, body, "instructions")
}

func TestOpenAIResponses(t *testing.T) {
	t.Parallel()
	accept(t, sdkAgent{agent: wrap(responsesAgent(false)), prompt: responsesPrompt})
}

func TestOpenAIResponsesStream(t *testing.T) {
	t.Parallel()
	accept(t, sdkAgent{agent: wrap(responsesAgent(true)), prompt: responsesPrompt})
}
