package genkit_test

import (
	"context"
	"fmt"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/firebase/genkit/go/plugins/compat_oai/openai"
	sfgenkit "github.com/stepfork/stepfork/contrib/genkit"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
)

// A Genkit agent with a recorded model and a recorded tool: the recording
// is replayed without calling either, and a fork's prompt change reaches
// the system message the model gets.
func Example() {
	ctx := context.Background()
	g := genkit.Init(ctx)

	// A model that asks for the weather, then answers with it and its
	// instructions; in an application, a plugin's models are recorded with
	// genkit.WithPlugins(sfgenkit.Plugin(plugin)).
	calls := 0
	genkit.RegisterAction(g, sfgenkit.Model(ai.NewModel("local/weather-1", &ai.ModelOptions{
		Supports: &ai.ModelSupports{Multiturn: true, Tools: true, SystemRole: true}},
		func(ctx context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			calls++
			last := req.Messages[len(req.Messages)-1]
			if last.Role == ai.RoleUser {
				return &ai.ModelResponse{Message: &ai.Message{Role: ai.RoleModel, Content: []*ai.Part{
					ai.NewToolRequestPart(&ai.ToolRequest{Name: "weather", Input: map[string]any{"city": last.Text()}})}}}, nil
			}
			answer := fmt.Sprintf("%v (%s)", last.Content[0].ToolResponse.Output, req.Messages[0].Text())
			return &ai.ModelResponse{Message: ai.NewModelTextMessage(answer)}, nil
		})))
	weather := sfgenkit.DefineTool(g, "weather", "The weather in a city.", func(tc *ai.ToolContext, in struct {
		City string `json:"city"`
	}) (string, error) {
		return "sunny in " + in.City, nil
	})

	agent := replay.Typed(func(ctx context.Context, city string) (string, error) {
		return genkit.GenerateText(ctx, g, ai.WithModelName("local/weather-1"), ai.WithSystem("Be terse."),
			ai.WithPrompt(city), ai.WithTools(weather))
	})

	rec, _ := replay.Record(ctx, "weather", "Pokhara", agent)
	fmt.Println(rec.Output, "— model calls:", calls)

	res, _ := replay.Replay(ctx, rec.Trace, agent)
	fmt.Println(res.Output, "— model calls:", calls)

	v, _ := fork.Run(ctx, rec.Trace, fork.Start(), agent, fork.Prompt(fork.All, "Be kind."))
	fmt.Println(v.Output, "— model calls:", calls)
	// Output:
	// sunny in Pokhara (Be terse.) — model calls: 2
	// sunny in Pokhara (Be terse.) — model calls: 2
	// sunny in Pokhara (Be kind.) — model calls: 4
}

// A plugin's models and tools are recorded by wrapping the plugin where
// Genkit is initialized; the agent's code does not change.
func ExamplePlugin() {
	ctx := context.Background()
	g := genkit.Init(ctx, genkit.WithPlugins(sfgenkit.Plugin(&openai.OpenAI{}, sfgenkit.WithPrices(replay.Prices{
		"openai/gpt-4o": {Input: 2.5, CachedInput: 1.25, Output: 10},
	}))))
	agent := replay.Typed(func(ctx context.Context, q string) (string, error) {
		return genkit.GenerateText(ctx, g, ai.WithModelName("openai/gpt-4o"), ai.WithPrompt(q))
	})
	rec, err := replay.Record(ctx, "ask", "What is Stepfork?", agent, replay.SaveTo("testdata/ask.sftrace"))
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Output)
}
