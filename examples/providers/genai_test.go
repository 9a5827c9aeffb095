package providers_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/genai"

	"github.com/stepfork/stepfork/internal/fakeprovider"
	"github.com/stepfork/stepfork/trace"
)

// geminiAgent is the agent on google.golang.org/genai: a system
// instruction, a function declaration, a functionCall answered with a
// functionResponse, streamed or not.
func geminiAgent(stream bool) func(*testing.T, *fakeprovider.Server, *http.Client) func(context.Context, trace.Value) (any, error) {
	return func(t *testing.T, srv *fakeprovider.Server, hc *http.Client) func(context.Context, trace.Value) (any, error) {
		client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
			APIKey: "AIzaTEST-SECRET-0123456789", Backend: genai.BackendGeminiAPI, HTTPClient: hc,
			HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL + "/"},
		})
		if err != nil {
			t.Fatal(err)
		}
		config := &genai.GenerateContentConfig{
			SystemInstruction: genai.NewContentFromText("Be terse.", genai.RoleUser),
			Temperature:       genai.Ptr[float32](0.2),
			Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{Name: "lookup", Description: "Looks the weather up.",
				Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"q": {Type: genai.TypeString}}}}}}},
		}
		generate := func(ctx context.Context, contents []*genai.Content) (*genai.Content, string, error) {
			if !stream {
				resp, err := client.Models.GenerateContent(ctx, model, contents, config)
				if err != nil {
					return nil, "", err
				}
				return resp.Candidates[0].Content, text(resp), nil
			}
			whole := &genai.Content{Role: genai.RoleModel}
			for resp, err := range client.Models.GenerateContentStream(ctx, model, contents, config) {
				if err != nil {
					return nil, "", err
				}
				whole.Parts = append(whole.Parts, resp.Candidates[0].Content.Parts...)
			}
			return whole, text(&genai.GenerateContentResponse{Candidates: []*genai.Candidate{{Content: whole}}}), nil
		}
		return func(ctx context.Context, _ trace.Value) (any, error) {
			contents := []*genai.Content{genai.NewContentFromText("weather?", genai.RoleUser)}
			for {
				content, text, err := generate(ctx, contents)
				if err != nil {
					return nil, err
				}
				var responses []*genai.Part
				for _, p := range content.Parts {
					if p.FunctionCall == nil {
						continue
					}
					out, err := lookup(ctx, "Kathmandu")
					if err != nil {
						return nil, err
					}
					responses = append(responses, genai.NewPartFromFunctionResponse(p.FunctionCall.Name, map[string]any{"result": out}))
				}
				if len(responses) == 0 {
					return text, nil
				}
				contents = append(contents, content, &genai.Content{Role: genai.RoleUser, Parts: responses})
			}
		}
	}
}

// text is the text of a response's first candidate (resp.Text() logs a
// warning for the function calls it skips).
func text(resp *genai.GenerateContentResponse) string {
	var s string
	for _, p := range resp.Candidates[0].Content.Parts {
		if p.FunctionCall == nil {
			s += p.Text
		}
	}
	return s
}

func geminiPrompt(t *testing.T, body map[string]any) string {
	assert.NotContains(t, body, "system")
	return str(t, body, "systemInstruction", "parts", 0, "text")
}

func TestGemini(t *testing.T) {
	t.Parallel()
	accept(t, sdkAgent{agent: wrap(geminiAgent(false)), prompt: geminiPrompt})
}

func TestGeminiStream(t *testing.T) {
	t.Parallel()
	accept(t, sdkAgent{agent: wrap(geminiAgent(true)), prompt: geminiPrompt})
}
