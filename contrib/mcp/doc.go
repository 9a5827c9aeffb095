// Package mcp records and replays the requests an agent makes to MCP servers
// (github.com/modelcontextprotocol/go-sdk), so that a run of an agent with
// MCP tools can be replayed and forked by packages replay and fork without
// any server.
//
// Make one [Client] per server from the SDK's client and a transport, and
// call the server through it instead of through an [mcp.ClientSession]:
//
//	tracker := sfmcp.New("", mcp.NewClient(&mcp.Implementation{Name: "triage"}, nil),
//		&mcp.CommandTransport{Command: exec.Command("tracker-mcp")})
//	defer tracker.Close()
//
//	tools, err := tracker.ListTools(ctx, nil)
//	…
//	res, err := tracker.CallTool(ctx, &mcp.CallToolParams{Name: "add_label", Arguments: args})
//
// # What is recorded
//
// Every tool call is a tool call of the run named after the tool, so
// assertions (assert.ToolCalled(t, run, "add_label")), fork targets
// (fork.OnCall("add_label", 1)) and the side-effect guard (fork.Allow("add_label"))
// name MCP tools like any other tool. Its input is the call's arguments, its
// output the [mcp.CallToolResult]. A result with IsError set is a failed call
// (error type [ToolErrorType]). With several servers, give each [Client] a
// server name and its tools are recorded as "server/tool" ([Client.Name]).
//
// The other requests are recorded as tool calls named after their MCP method,
// with the request's params as input: "tools/list" ([Client.ListTools]),
// "resources/list", "resources/read" and "prompts/get".
//
// # Lazy connection
//
// A [Client] connects when a request first runs live: while recording,
// in a live tail of a fork, or with no replay session in the context. A
// frozen replay, and a fork whose tail makes no live MCP request, serve every
// request from the recording and never connect, so a stdio server is never
// started and a remote one never contacted.
//
// In a fork's tail a tool call whose name and arguments equal a base call not
// yet consumed is served from the recording; any other is blocked by the
// side-effect guard unless fork.Allow names it, and a blocked call never
// reaches the server.
package mcp
