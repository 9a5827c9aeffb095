package fakeprovider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// Wire is the agent of one wire format: a first request the model answers
// with a tool call, and a second that carries the tool's result back under
// the id the model minted, each as that API's clients write it (a system
// or developer prompt "Be terse.", a user question "weather?").
type Wire struct {
	Name   string // chat, responses, anthropic or gemini, with "/stream" when streamed
	Stream bool
	path   func(model string) string
	first  func(model string, stream bool) string
	second func(model string, stream bool, resp []byte, result string) string
}

var (
	callID = regexp.MustCompile(`"((?:call|toolu)_[0-9a-f]+)"`)
	respID = regexp.MustCompile(`"(resp_[0-9a-f]+)"`)
)

// CallID is the first tool-call id (call_…, toolu_…) in b.
func CallID(b []byte) string { return match(callID, b) }

func match(re *regexp.Regexp, b []byte) string {
	m := re.FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

func streamKey(stream bool) string {
	if stream {
		return `,"stream":true`
	}
	return ""
}

var wires = []Wire{
	{
		Name: "chat",
		path: func(string) string { return "/v1/chat/completions" },
		first: func(m string, st bool) string {
			return fmt.Sprintf(`{"model":%q,"messages":[{"role":"developer","content":"Be terse."},{"role":"user","content":"weather?"}]%s}`, m, streamKey(st))
		},
		second: func(m string, st bool, resp []byte, result string) string {
			id := match(callID, resp)
			return fmt.Sprintf(`{"model":%q,"messages":[{"role":"developer","content":"Be terse."},{"role":"user","content":"weather?"},`+
				`{"role":"assistant","tool_calls":[{"id":%q,"type":"function","function":{"name":"lookup","arguments":"{\"q\":\"weather\"}"}}]},`+
				`{"role":"tool","tool_call_id":%q,"content":%q}]%s}`, m, id, id, result, streamKey(st))
		},
	},
	{
		Name: "responses",
		path: func(string) string { return "/v1/responses" },
		first: func(m string, st bool) string {
			return fmt.Sprintf(`{"model":%q,"instructions":"Be terse.","input":"weather?"%s}`, m, streamKey(st))
		},
		second: func(m string, st bool, resp []byte, result string) string {
			return fmt.Sprintf(`{"model":%q,"instructions":"Be terse.","previous_response_id":%q,"input":[{"type":"function_call_output","call_id":%q,"output":%q}]%s}`,
				m, match(respID, resp), match(callID, resp), result, streamKey(st))
		},
	},
	{
		Name: "anthropic",
		path: func(string) string { return "/v1/messages" },
		first: func(m string, st bool) string {
			return fmt.Sprintf(`{"model":%q,"max_tokens":256,"system":[{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"weather?"}]%s}`, m, streamKey(st))
		},
		second: func(m string, st bool, resp []byte, result string) string {
			id := match(callID, resp)
			return fmt.Sprintf(`{"model":%q,"max_tokens":256,"system":[{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"weather?"},`+
				`{"role":"assistant","content":[{"type":"tool_use","id":%q,"name":"lookup","input":{"q":"weather"}}]},`+
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":%q}]}]%s}`, m, id, id, result, streamKey(st))
		},
	},
	{
		Name: "gemini",
		path: func(m string) string { return "/v1beta/models/" + m + ":generateContent" },
		first: func(string, bool) string {
			return `{"systemInstruction":{"parts":[{"text":"Be terse."}]},"contents":[{"role":"user","parts":[{"text":"weather?"}]}],"generationConfig":{"temperature":0.2}}`
		},
		second: func(_ string, _ bool, _ []byte, result string) string {
			return fmt.Sprintf(`{"systemInstruction":{"parts":[{"text":"Be terse."}]},"contents":[{"role":"user","parts":[{"text":"weather?"}]},`+
				`{"role":"model","parts":[{"functionCall":{"name":"lookup","args":{"q":"weather"}}}]},`+
				`{"role":"user","parts":[{"functionResponse":{"name":"lookup","response":{"result":%q}}}]}],"generationConfig":{"temperature":0.2}}`, result)
		},
	},
}

// AllWires is every wire format, streamed and not.
func AllWires() []Wire {
	var out []Wire
	for _, c := range wires {
		out = append(out, c)
		st := c
		st.Name, st.Stream = c.Name+"/stream", true
		if c.Name == "gemini" {
			st.path = func(m string) string { return "/v1beta/models/" + m + ":streamGenerateContent?alt=sse" }
		}
		out = append(out, st)
	}
	return out
}

// Agent is the two-turn agent of c against srv, through client; the tool
// "lookup" runs through replay.Tool and answers "sunny, 21C". The agent's
// output is the text of the model's last response body.
func (c Wire) Agent(srv *Server, client *http.Client, model string) replay.Agent {
	lookup := replay.Tool("lookup", func(_ context.Context, q string) (string, error) { return "sunny, 21C", nil })
	post := func(ctx context.Context, body string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+c.path(model), strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk-live-SECRET0123456789abcdef")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return b, err
	}
	return func(ctx context.Context, _ trace.Value) (any, error) {
		first, err := post(ctx, c.first(model, c.Stream))
		if err != nil {
			return nil, err
		}
		result, err := lookup(ctx, "weather")
		if err != nil {
			return nil, err
		}
		second, err := post(ctx, c.second(model, c.Stream, first, result))
		if err != nil {
			return nil, err
		}
		return Answer(second), nil
	}
}

// Path is the URL path of c's model calls for model.
func (c Wire) Path(model string) string { return c.path(model) }

var answerText = regexp.MustCompile(`"(?:text|content|delta)":"((?:[^"\\]|\\.)*)"`)

// Answer is the text a response of this server says (every text field of
// its body or frames, joined).
func Answer(body []byte) string {
	var b strings.Builder
	for _, m := range answerText.FindAllSubmatch(body, -1) {
		b.Write(m[1])
	}
	return b.String()
}
