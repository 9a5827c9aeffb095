package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stepfork/stepfork/replay"
)

// Client is an MCP client session whose requests are recorded and replayed
// through package replay. It connects to its server lazily: the first time a
// request runs live, never while a replay or a fork's served prefix answers
// it from the recording. A Client is safe for concurrent use.
type Client struct {
	server    string
	client    *mcp.Client
	transport mcp.Transport

	mu      sync.Mutex
	session *mcp.ClientSession
	err     error // the connection failure, returned to every later live call
}

// New returns a [Client] that will connect client over transport when a
// request first runs live. transport is used at most once, as the SDK
// requires; for an [mcp.CommandTransport] that is when the server process
// starts.
//
// server names the server in the recorded tool names when an agent talks to
// several: with server "github", tool create_issue is recorded as
// "github/create_issue" (see [Client.Name]). Use "" for an agent with a single
// server, whose tools keep their own names.
func New(server string, client *mcp.Client, transport mcp.Transport) *Client {
	return &Client{server: server, client: client, transport: transport}
}

// Name returns the name under which calls of tool are recorded: tool itself,
// or "server/tool" for a [Client] made with a server name. It is the name to
// give fork.Allow, fork.OnCall and the assertions of package assert.
// MCP tool names cannot contain '/', so qualified names never collide.
func (c *Client) Name(tool string) string {
	if c.server == "" {
		return tool
	}
	return c.server + "/" + tool
}

// Connected reports whether the client has connected to its server.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session != nil
}

// Session connects now if the client has not connected yet, and returns the
// SDK session, for requests this package does not wrap. Requests made on it
// directly are neither recorded nor served.
func (c *Client) Session(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil || c.err != nil {
		return c.session, c.err
	}
	if c.client == nil || c.transport == nil {
		c.err = errors.New("contrib/mcp: the Client has no mcp.Client or no transport; make it with New")
		return nil, c.err
	}
	// The session outlives the request that opened it.
	cs, err := c.client.Connect(context.WithoutCancel(ctx), c.transport, nil)
	if err != nil {
		c.err = fmt.Errorf("contrib/mcp: connecting to MCP server %s: %w", c.label(), err)
		return nil, c.err
	}
	c.session = cs
	return cs, nil
}

// Close closes the session if the client connected (a stdio server is
// stopped); a client that never connected has nothing to close.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		return nil
	}
	err := c.session.Close()
	c.session = nil
	c.err = errors.New("contrib/mcp: the Client is closed")
	return err
}

func (c *Client) label() string {
	if c.server == "" {
		return "(unnamed)"
	}
	return fmt.Sprintf("%q", c.server)
}

// ToolErrorType is the error_type of a tool call whose result had IsError
// set: the trace records such a call as failed, with the result's text as
// the message.
const ToolErrorType = "MCPToolError"

// toolError carries a result with IsError through replay.Tool, so that the
// call is recorded as failed.
type toolError struct{ res *mcp.CallToolResult }

func (e *toolError) Error() string     { return resultText(e.res) }
func (e *toolError) ErrorType() string { return ToolErrorType }

// resultText joins the text content of a result.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// CallTool calls a tool of the server, recorded as a tool call named
// [Client.Name](params.Name) whose input is params.Arguments and whose
// output is the [mcp.CallToolResult]. On replay the recorded result is
// returned without connecting.
//
// A result with IsError set is returned as the SDK returns it (a result, no
// error), and recorded as a failed call (error type [ToolErrorType], the
// result's text as message), so that assertions and diffs see the failure;
// served back, it is a result with IsError and that text. Other content of an
// error result is not kept.
//
// A call the session refuses (a divergence, or a fork's side-effect guard
// blocking a tool the base run never called) returns the session's error
// and does not reach the server.
func (c *Client) CallTool(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if params == nil || params.Name == "" {
		return nil, errors.New("contrib/mcp: CallTool needs params with the tool's Name")
	}
	p := *params
	call := replay.Tool(c.Name(p.Name), func(ctx context.Context, args any) (*mcp.CallToolResult, error) {
		cs, err := c.Session(ctx)
		if err != nil {
			return nil, err
		}
		q := p
		q.Arguments = args
		res, err := cs.CallTool(ctx, &q)
		if err != nil {
			return nil, err
		}
		if res.IsError {
			return nil, &toolError{res}
		}
		return res, nil
	})
	res, err := call(ctx, p.Arguments)
	var te *toolError
	var re *replay.RecordedError
	switch {
	case errors.As(err, &te):
		return te.res, nil
	case errors.As(err, &re) && re.Type == ToolErrorType:
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: re.Message}}}, nil
	}
	return res, err
}

// ListTools lists the server's tools (tools/list), recorded as a tool call
// named [Client.Name]("tools/list") whose input is params.
func (c *Client) ListTools(ctx context.Context, params *mcp.ListToolsParams) (*mcp.ListToolsResult, error) {
	return request(ctx, c, "tools/list", params, (*mcp.ClientSession).ListTools)
}

// ListResources lists the server's resources (resources/list), recorded as a
// tool call named [Client.Name]("resources/list") whose input is params.
func (c *Client) ListResources(ctx context.Context, params *mcp.ListResourcesParams) (*mcp.ListResourcesResult, error) {
	return request(ctx, c, "resources/list", params, (*mcp.ClientSession).ListResources)
}

// ReadResource reads a resource (resources/read), recorded as a tool call
// named [Client.Name]("resources/read") whose input is params (the URI).
func (c *Client) ReadResource(ctx context.Context, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	return request(ctx, c, "resources/read", params, (*mcp.ClientSession).ReadResource)
}

// GetPrompt gets a prompt (prompts/get), recorded as a tool call named
// [Client.Name]("prompts/get") whose input is params.
func (c *Client) GetPrompt(ctx context.Context, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	return request(ctx, c, "prompts/get", params, (*mcp.ClientSession).GetPrompt)
}

// request records one MCP request other than a tool call as a tool call
// named after its method.
func request[P, R any](ctx context.Context, c *Client, method string, params *P, do func(*mcp.ClientSession, context.Context, *P) (*R, error)) (*R, error) {
	if params == nil {
		params = new(P)
	}
	call := replay.Tool(c.Name(method), func(ctx context.Context, p *P) (*R, error) {
		cs, err := c.Session(ctx)
		if err != nil {
			return nil, err
		}
		return do(cs, ctx, p)
	})
	return call(ctx, params)
}
