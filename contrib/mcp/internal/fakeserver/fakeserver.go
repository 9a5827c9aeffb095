// Package fakeserver is the MCP server the tests of package mcp talk to,
// in process (over the SDK's in-memory transport) and as a stdio process
// (cmd/fakemcp): an issue tracker with a read tool, two side-effect tools,
// a tool that fails with an IsError result, and one resource.
package fakeserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Calls counts the requests a server answered, by method or tool name.
type Calls struct {
	mu sync.Mutex
	n  map[string]int
	// OnCall, when set, is called with every method or tool name answered.
	OnCall func(name string)
}

// Get returns how many times name was answered.
func (c *Calls) Get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// Total returns the number of requests answered.
func (c *Calls) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := 0
	for _, n := range c.n {
		t += n
	}
	return t
}

func (c *Calls) add(name string) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[name]++
	f := c.OnCall
	c.mu.Unlock()
	if f != nil {
		f(name)
	}
}

// SearchIn is the input of search_issues.
type SearchIn struct {
	Query string `json:"query"`
}

// IssueIn is the input of add_label and close_issue.
type IssueIn struct {
	Issue int    `json:"issue"`
	Label string `json:"label,omitempty"`
}

// New returns the fake tracker server named name, counting what it answers
// in calls. Every answer carries a fresh random request id, as real servers'
// answers differ run to run.
func New(name string, calls *Calls) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "v0.0.1"}, nil)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list", "resources/read", "resources/list":
				calls.add(method)
			}
			return next(ctx, method, req)
		}
	})
	mcp.AddTool(s, &mcp.Tool{Name: "search_issues", Description: "Search the tracker's issues."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in SearchIn) (*mcp.CallToolResult, any, error) {
			calls.add("search_issues")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
				Text: fmt.Sprintf("issue 42: %q crashes on empty input (request %08x)", in.Query, rand.Uint32())}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_label", Description: "Label an issue."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in IssueIn) (*mcp.CallToolResult, any, error) {
			calls.add("add_label")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
				Text: fmt.Sprintf("labelled %d %s", in.Issue, in.Label)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "close_issue", Description: "Close an issue."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in IssueIn) (*mcp.CallToolResult, any, error) {
			calls.add("close_issue")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
				Text: fmt.Sprintf("closed %d", in.Issue)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "assign", Description: "Assign an issue (the tracker refuses: nobody may be assigned)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in IssueIn) (*mcp.CallToolResult, any, error) {
			calls.add("assign")
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
				Text: fmt.Sprintf("issue %d: assignment is disabled in this project", in.Issue)}}}, nil, nil
		})
	s.AddResource(&mcp.Resource{URI: "tracker://policy", Name: "policy", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain",
				Text: "Label crashes as bug."}}}, nil
		})
	return s
}
