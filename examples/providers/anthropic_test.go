package providers_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"

	"github.com/stepfork/stepfork/internal/fakeprovider"
	"github.com/stepfork/stepfork/trace"
)

// anthropicAgent is the agent on anthropic-sdk-go/v2: a cached system block,
// a tool, tool_use answered with tool_result, streamed (Message.Accumulate)
// or not.
func anthropicAgent(stream bool) func(*testing.T, *fakeprovider.Server, *http.Client) func(context.Context, trace.Value) (any, error) {
	return func(_ *testing.T, srv *fakeprovider.Server, hc *http.Client) func(context.Context, trace.Value) (any, error) {
		client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("sk-ant-test-SECRET-0123456789"),
			option.WithHTTPClient(hc), option.WithMaxRetries(0))
		send := func(ctx context.Context, p anthropic.MessageNewParams) (*anthropic.Message, error) {
			if !stream {
				return client.Messages.New(ctx, p)
			}
			s := client.Messages.NewStreaming(ctx, p)
			defer s.Close()
			var msg anthropic.Message
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					return nil, err
				}
			}
			return &msg, s.Err()
		}
		return func(ctx context.Context, _ trace.Value) (any, error) {
			p := anthropic.MessageNewParams{
				Model:     model,
				MaxTokens: 256,
				System:    []anthropic.TextBlockParam{{Text: "Be terse.", CacheControl: anthropic.NewCacheControlEphemeralParam()}},
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather?"))},
				Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
					Properties: map[string]any{"q": map[string]any{"type": "string"}}}, "lookup")},
			}
			for {
				msg, err := send(ctx, p)
				if err != nil {
					return nil, err
				}
				var results []anthropic.ContentBlockParamUnion
				var text strings.Builder
				for _, b := range msg.Content {
					switch b.Type {
					case "text":
						text.WriteString(b.Text)
					case "tool_use":
						out, err := lookup(ctx, "Kathmandu")
						if err != nil {
							return nil, err
						}
						results = append(results, anthropic.NewToolResultBlock(b.ID, out, false))
					}
				}
				if len(results) == 0 {
					return text.String(), nil
				}
				p.Messages = append(p.Messages, msg.ToParam(), anthropic.NewUserMessage(results...))
			}
		}
	}
}

func anthropicPrompt(t *testing.T, body map[string]any) string {
	system, _ := body["system"].([]any)
	assert.Len(t, system, 1, "the block array keeps its structure")
	assert.Equal(t, "ephemeral", str(t, body, "system", 0, "cache_control", "type"), "and its cache_control")
	return str(t, body, "system", 0, "text")
}

func TestAnthropic(t *testing.T) {
	t.Parallel()
	accept(t, sdkAgent{agent: wrap(anthropicAgent(false)), prompt: anthropicPrompt})
}

func TestAnthropicStream(t *testing.T) {
	t.Parallel()
	accept(t, sdkAgent{agent: wrap(anthropicAgent(true)), prompt: anthropicPrompt})
}
