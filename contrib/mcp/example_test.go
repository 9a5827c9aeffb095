package mcp_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sfmcp "github.com/stepfork/stepfork/contrib/mcp"
	"github.com/stepfork/stepfork/replay"
)

// startsServer is a transport that starts an in-process MCP server when the
// client connects, and says so.
type startsServer struct{ server *mcp.Server }

func (s startsServer) Connect(ctx context.Context) (mcp.Connection, error) {
	fmt.Println("server started")
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.server.Connect(ctx, st, nil); err != nil {
		return nil, err
	}
	return ct.Connect(ctx)
}

// An agent's MCP tool call is recorded under the tool's name; the frozen
// replay serves it without starting the server.
func Example() {
	server := mcp.NewServer(&mcp.Implementation{Name: "weather"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "forecast"}, func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
		City string `json:"city"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sunny in " + in.City}}}, nil, nil
	})

	agent := replay.Typed(func(ctx context.Context, city string) (string, error) {
		weather := sfmcp.New("", mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil), startsServer{server})
		defer weather.Close()
		res, err := weather.CallTool(ctx, &mcp.CallToolParams{Name: "forecast", Arguments: map[string]any{"city": city}})
		if err != nil {
			return "", err
		}
		return res.Content[0].(*mcp.TextContent).Text, nil
	})

	ctx := context.Background()
	rec, err := replay.Record(ctx, "weather", "Kathmandu", agent)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("recorded:", rec.Output, "—", rec.Trace.Events[1].Type, rec.Trace.Events[1].Name)

	res, err := replay.Replay(ctx, rec.Trace, agent)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("replayed:", res.Output, "— executed", res.Executed)
	// Output:
	// server started
	// recorded: sunny in Kathmandu — tool_call forecast
	// replayed: sunny in Kathmandu — executed 0
}
