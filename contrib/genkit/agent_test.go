package genkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/firebase/genkit/go/plugins/compat_oai/openai"
	"github.com/openai/openai-go/option"
	sfgenkit "github.com/stepfork/stepfork/contrib/genkit"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace/diff"
)

// prices are per million tokens.
var prices = replay.Prices{"openai/gpt-4o": {Input: 2.5, Output: 10}, "gpt-4o-mini": {Input: 0.15, Output: 0.6}}

const (
	modelName    = "openai/gpt-4o"
	systemPrompt = "You book flights for travellers."
	ask          = "Book me a flight from Kathmandu to Delhi."
)

// world is one test's Genkit instance (the openai plugin against a fake
// server, recorded) and its tools, which count their runs and take a
// random time, so that the goroutines Genkit runs them on finish in any
// order.
type world struct {
	api                   *fakeOpenAI
	g                     *genkit.Genkit
	search, weather, book atomic.Int32
	tools                 []ai.ToolRef
	opts                  []sfgenkit.Option
}

type route struct {
	From string `json:"from"`
	To   string `json:"to"`
}

type city struct {
	City string `json:"city"`
}

type flight struct {
	Flight string `json:"flight"`
}

func jitter() { time.Sleep(time.Duration(rand.IntN(4)) * time.Millisecond) }

func newWorld(t *testing.T, opts ...sfgenkit.Option) *world {
	t.Helper()
	w := &world{api: newFakeOpenAI(t), opts: opts}
	w.g = genkit.Init(context.Background(), genkit.WithPlugins(sfgenkit.Plugin(
		&openai.OpenAI{APIKey: "sk-test-not-a-key", Opts: []option.RequestOption{option.WithBaseURL(w.api.url())}}, opts...)))
	search := sfgenkit.DefineTool(w.g, "search_flights", "Search flights between two airports.", func(tc *ai.ToolContext, r route) (string, error) {
		jitter()
		w.search.Add(1)
		return fmt.Sprintf("SF100 %s-%s 120 USD; SF050 %s-%s 80 USD", r.From, r.To, r.From, r.To), nil
	})
	weather := sfgenkit.DefineTool(w.g, "get_weather", "The weather in a city.", func(tc *ai.ToolContext, c city) (string, error) {
		jitter()
		w.weather.Add(1)
		return "sunny in " + c.City, nil
	})
	book := sfgenkit.DefineTool(w.g, "book_flight", "Book a flight.", func(tc *ai.ToolContext, f flight) (string, error) {
		jitter()
		w.book.Add(1)
		return "booked " + f.Flight, nil
	})
	w.tools = []ai.ToolRef{search, weather, book}
	return w
}

// agent asks the model with the tools; Genkit runs the tool calls of an
// answer on goroutines and loops until the model answers in text.
func (w *world) agent() replay.Agent {
	return replay.Typed(func(ctx context.Context, in string) (string, error) {
		resp, err := genkit.Generate(ctx, w.g, ai.WithModelName(modelName), ai.WithSystem(systemPrompt), ai.WithPrompt(in),
			ai.WithTools(w.tools...), ai.WithConfig(map[string]any{"temperature": 0.2}), ai.WithMaxTurns(6))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
}

// streamingAgent is agent with a streaming callback: it returns the text
// of every chunk, with the role of its message, then the answer.
func (w *world) streamingAgent() replay.Agent {
	return replay.Typed(func(ctx context.Context, in string) ([]string, error) {
		var got []string
		resp, err := genkit.Generate(ctx, w.g, ai.WithModelName(modelName), ai.WithSystem(systemPrompt), ai.WithPrompt(in),
			ai.WithTools(w.tools...), ai.WithMaxTurns(6),
			ai.WithStreaming(func(ctx context.Context, c *ai.ModelResponseChunk) error {
				got = append(got, fmt.Sprintf("%s#%d:%s", c.Role, c.Index, chunkText(c)))
				return nil
			}))
		if err != nil {
			return got, err
		}
		return append(got, "answer:"+resp.Text()), nil
	})
}

// chunkText is a chunk's text, and the names of its tool requests and
// responses.
// Genkit streams the tool responses of a turn in the order the tools
// finished, an accident of scheduling: they are sorted.
func chunkText(c *ai.ModelResponseChunk) string {
	s := ""
	var results []string
	for _, p := range c.Content {
		switch {
		case p.IsToolRequest():
			s += "[call " + p.ToolRequest.Name + "]"
		case p.IsToolResponse():
			results = append(results, "[result "+p.ToolResponse.Name+"]")
		default:
			s += p.Text
		}
	}
	slices.Sort(results)
	return s + strings.Join(results, "")
}

func (w *world) runs() [3]int32 { return [3]int32{w.search.Load(), w.weather.Load(), w.book.Load()} }

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func changedPaths(d *diff.Result) []string {
	var out []string
	for _, s := range d.Steps {
		switch s.Kind {
		case diff.Changed:
			for _, c := range s.Changes {
				out = append(out, string(s.Type)+" "+c.Path)
			}
		case diff.Added, diff.Removed:
			out = append(out, string(s.Kind)+" "+s.Label)
		}
	}
	return out
}
