package replay

import (
	"net/url"
	"strings"

	"github.com/stepfork/stepfork/trace"
)

// wire is the wire format of a model call made through Transport.
type wire uint8

const (
	wireChat      wire = iota + 1 // OpenAI chat completions (and compatible servers)
	wireResponses                 // OpenAI Responses
	wireAnthropic                 // Anthropic messages
	wireGemini                    // Gemini generateContent and streamGenerateContent
)

// geminiMethod is the method part of a Gemini model path
// (".../models/gemini-2.5-flash:generateContent"), "" for another path.
func geminiMethod(path string) (model, method string) {
	i := strings.LastIndex(path, "/models/")
	if i < 0 {
		return "", ""
	}
	rest := path[i+len("/models/"):]
	model, method, ok := strings.Cut(rest, ":")
	if !ok || model == "" || strings.Contains(model, "/") {
		return "", ""
	}
	switch method {
	case "generateContent", "streamGenerateContent":
		return model, method
	}
	return "", ""
}

// withGeminiModel is path with the model of a Gemini model path replaced.
func withGeminiModel(u *url.URL, model string) *url.URL {
	i := strings.LastIndex(u.Path, "/models/")
	if i < 0 {
		return u
	}
	rest := u.Path[i+len("/models/"):]
	_, method, _ := strings.Cut(rest, ":")
	out := *u
	out.Path = u.Path[:i] + "/models/" + model + ":" + method
	out.RawPath = ""
	return &out
}

// message is a model call's behaviour, the same for every wire format,
// streamed or not: what the model said, the tool calls it asked for, why it
// stopped, and the tokens it used. Transport records it as the "message"
// member of the llm_response output; package trace's diff compares it in
// place of the raw response.
type message struct {
	Content   string     `json:"content"`
	Reasoning string     `json:"reasoning,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
	Finish    string     `json:"finish_reason,omitempty"`
	Usage     *Usage     `json:"usage,omitempty"`
}

// toolCall is one tool call of a message; Arguments is the JSON the model
// wrote (a string when it is not valid JSON, as a cut-off stream leaves it).
type toolCall struct {
	ID        string      `json:"id,omitempty"`
	Name      string      `json:"name"`
	Arguments trace.Value `json:"arguments"`
}

// The kinds of the ids a provider mints in a response (see ReportIDs), by
// which the ids of two responses are paired.
const (
	mintedResponse = "response" // the response's id (chatcmpl-…, resp_…, msg_…)
	mintedCall     = "call"     // a tool call's id (call_…, toolu_…)
	mintedItem     = "item"     // an output item's id (Responses: msg_…, fc_…, rs_…)
)

// assembled is what a response says: its message and the ids it minted.
type assembled struct {
	msg    message
	minted []mintedID
	ok     bool // the response is one the wire format's parser understood
}

func (a *assembled) mint(k, id string) {
	if id != "" {
		a.minted = append(a.minted, mintedID{k, id})
	}
}

// arguments is a tool call's arguments as JSON, from the text a model wrote.
func arguments(s string) trace.Value {
	if strings.TrimSpace(s) == "" {
		return trace.NullValue
	}
	if v, err := trace.ParseValue([]byte(s)); err == nil {
		return v
	}
	return trace.StringValue(s)
}

func str(v trace.Value) string {
	s, _ := v.Str()
	return s
}

func count(v trace.Value) int64 {
	n, _ := v.Int()
	if n < 0 {
		return 0
	}
	return n
}

// assemble reads the message of a recorded response output (status,
// headers, body or stream) in wire format w.
func assemble(w wire, out trace.Value) assembled {
	if st, _ := out.Get("status").Int(); st/100 != 2 {
		return assembled{}
	}
	if frames := out.Get("stream"); frames.Kind() == trace.Array {
		var a assembled
		switch w {
		case wireChat:
			a = chatStream(frames)
		case wireResponses:
			a = responsesStream(frames)
		case wireAnthropic:
			a = anthropicStream(frames)
		case wireGemini:
			a = geminiStream(frames)
		}
		return a
	}
	body := out.Get("body")
	if body.Kind() != trace.Object {
		return assembled{}
	}
	var a assembled
	switch w {
	case wireChat:
		a = chatBody(body)
	case wireResponses:
		a = responsesBody(body)
	case wireAnthropic:
		a = anthropicBody(body)
	case wireGemini:
		a = geminiBody(body)
	}
	return a
}

// streamEnded reports whether frames end with the frame that ends a stream
// of wire format w: [DONE] (chat), response.completed, .incomplete or
// .failed (Responses), message_stop (Anthropic), a candidate's finishReason
// (Gemini).
func streamEnded(w wire, frames []trace.Value) bool {
	if len(frames) == 0 {
		return false
	}
	d := frames[len(frames)-1].Get("data")
	switch w {
	case wireChat:
		return str(d) == "[DONE]"
	case wireResponses:
		switch str(d.Get("type")) {
		case "response.completed", "response.incomplete", "response.failed":
			return true
		}
	case wireAnthropic:
		return str(d.Get("type")) == "message_stop"
	case wireGemini:
		for _, c := range d.Get("candidates").Elems() {
			if str(c.Get("finishReason")) != "" {
				return true
			}
		}
	}
	return false
}

// ---- OpenAI chat completions ----

func chatBody(body trace.Value) assembled {
	a := assembled{ok: true}
	a.mint(mintedResponse, str(body.Get("id")))
	for _, ch := range body.Get("choices").Elems() {
		if idx, _ := ch.Get("index").Int(); idx != 0 {
			continue
		}
		m := ch.Get("message")
		a.msg.Content = chatText(m.Get("content"))
		a.msg.Reasoning = str(m.Get("reasoning_content"))
		if r := str(m.Get("refusal")); r != "" && a.msg.Content == "" {
			a.msg.Content = r
		}
		for _, tc := range m.Get("tool_calls").Elems() {
			id := str(tc.Get("id"))
			a.mint(mintedCall, id)
			fn := tc.Get("function")
			a.msg.ToolCalls = append(a.msg.ToolCalls, toolCall{ID: id, Name: str(fn.Get("name")), Arguments: arguments(str(fn.Get("arguments")))})
		}
		a.msg.Finish = str(ch.Get("finish_reason"))
		break
	}
	a.msg.Usage = openAIUsage(body.Get("usage"))
	return a
}

// chatText is a chat message's content: a string, or the text of its parts.
func chatText(c trace.Value) string {
	if s, ok := c.Str(); ok {
		return s
	}
	var b strings.Builder
	for _, p := range c.Elems() {
		b.WriteString(str(p.Get("text")))
	}
	return b.String()
}

func chatStream(frames trace.Value) assembled {
	a := assembled{ok: true}
	type partial struct {
		id, name string
		args     strings.Builder
	}
	var calls []*partial
	var content, reasoning strings.Builder
	for _, f := range frames.Elems() {
		d := f.Get("data")
		if d.Kind() != trace.Object {
			continue
		}
		if len(a.minted) == 0 {
			a.mint(mintedResponse, str(d.Get("id")))
		}
		if u := openAIUsage(d.Get("usage")); u != nil {
			a.msg.Usage = u
		}
		for _, ch := range d.Get("choices").Elems() {
			if idx, _ := ch.Get("index").Int(); idx != 0 {
				continue
			}
			delta := ch.Get("delta")
			content.WriteString(chatText(delta.Get("content")))
			reasoning.WriteString(str(delta.Get("reasoning_content")))
			for _, tc := range delta.Get("tool_calls").Elems() {
				i := int(count(tc.Get("index")))
				for len(calls) <= i && i < 1024 {
					calls = append(calls, &partial{})
				}
				if i >= len(calls) {
					continue
				}
				p := calls[i]
				if id := str(tc.Get("id")); id != "" && p.id == "" {
					p.id = id
				}
				fn := tc.Get("function")
				p.name += str(fn.Get("name"))
				p.args.WriteString(str(fn.Get("arguments")))
			}
			if fr := str(ch.Get("finish_reason")); fr != "" {
				a.msg.Finish = fr
			}
		}
	}
	a.msg.Content, a.msg.Reasoning = content.String(), reasoning.String()
	for _, p := range calls {
		a.mint(mintedCall, p.id)
		a.msg.ToolCalls = append(a.msg.ToolCalls, toolCall{ID: p.id, Name: p.name, Arguments: arguments(p.args.String())})
	}
	return a
}

// openAIUsage reads a chat completions or Responses usage object.
func openAIUsage(u trace.Value) *Usage {
	if u.Kind() != trace.Object {
		return nil
	}
	var out Usage
	out.PromptTokens = count(u.Get("prompt_tokens")) + count(u.Get("input_tokens"))
	out.CompletionTokens = count(u.Get("completion_tokens")) + count(u.Get("output_tokens"))
	for _, k := range [...]string{"prompt_tokens_details", "input_tokens_details"} {
		out.CachedTokens += count(u.Get(k).Get("cached_tokens"))
	}
	for _, k := range [...]string{"completion_tokens_details", "output_tokens_details"} {
		out.ReasoningTokens += count(u.Get(k).Get("reasoning_tokens"))
	}
	out.TotalTokens = count(u.Get("total_tokens"))
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	if out == (Usage{}) {
		return nil
	}
	return &out
}

// ---- OpenAI Responses ----

func responsesBody(body trace.Value) assembled {
	a := assembled{ok: true}
	a.mint(mintedResponse, str(body.Get("id")))
	var content, reasoning strings.Builder
	for _, item := range body.Get("output").Elems() {
		responsesItem(&a, item, &content, &reasoning)
	}
	a.msg.Content, a.msg.Reasoning = content.String(), reasoning.String()
	a.msg.Finish = str(body.Get("status"))
	if r := str(body.Get("incomplete_details").Get("reason")); r != "" {
		a.msg.Finish += ":" + r
	}
	a.msg.Usage = openAIUsage(body.Get("usage"))
	return a
}

func responsesItem(a *assembled, item trace.Value, content, reasoning *strings.Builder) {
	a.mint(mintedItem, str(item.Get("id")))
	switch str(item.Get("type")) {
	case "message":
		for _, c := range item.Get("content").Elems() {
			switch str(c.Get("type")) {
			case "output_text":
				content.WriteString(str(c.Get("text")))
			case "refusal":
				content.WriteString(str(c.Get("refusal")))
			}
		}
	case "function_call", "custom_tool_call":
		id := str(item.Get("call_id"))
		a.mint(mintedCall, id)
		args := item.Get("arguments")
		if args.IsAbsent() {
			args = item.Get("input")
		}
		a.msg.ToolCalls = append(a.msg.ToolCalls, toolCall{ID: id, Name: str(item.Get("name")), Arguments: arguments(str(args))})
	case "reasoning":
		for _, s := range item.Get("summary").Elems() {
			reasoning.WriteString(str(s.Get("text")))
		}
	}
}

// responsesStream is the final response of a Responses stream
// (response.completed, .incomplete or .failed), or, for a stream cut off
// before it, the output items it finished and the text it streamed.
func responsesStream(frames trace.Value) assembled {
	var last trace.Value
	var items []trace.Value
	var text strings.Builder
	id := ""
	for _, f := range frames.Elems() {
		d := f.Get("data")
		switch typ := str(d.Get("type")); typ {
		case "response.completed", "response.incomplete", "response.failed":
			last = d.Get("response")
		case "response.created":
			id = str(d.Get("response").Get("id"))
		case "response.output_item.done":
			items = append(items, d.Get("item"))
		case "response.output_text.delta":
			text.WriteString(str(d.Get("delta")))
		}
	}
	if last.Kind() == trace.Object {
		return responsesBody(last)
	}
	a := assembled{ok: true}
	a.mint(mintedResponse, id)
	var content, reasoning strings.Builder
	for _, it := range items {
		responsesItem(&a, it, &content, &reasoning)
	}
	a.msg.Content, a.msg.Reasoning = content.String(), reasoning.String()
	if a.msg.Content == "" {
		a.msg.Content = text.String()
	}
	return a
}

// ---- Anthropic messages ----

func anthropicBody(body trace.Value) assembled {
	a := assembled{ok: true}
	a.mint(mintedResponse, str(body.Get("id")))
	var content, reasoning strings.Builder
	for _, b := range body.Get("content").Elems() {
		switch str(b.Get("type")) {
		case "text":
			content.WriteString(str(b.Get("text")))
		case "thinking":
			reasoning.WriteString(str(b.Get("thinking")))
		case "tool_use", "server_tool_use":
			id := str(b.Get("id"))
			a.mint(mintedCall, id)
			in := b.Get("input")
			if in.IsAbsent() {
				in = trace.NullValue
			}
			a.msg.ToolCalls = append(a.msg.ToolCalls, toolCall{ID: id, Name: str(b.Get("name")), Arguments: in})
		}
	}
	a.msg.Content, a.msg.Reasoning = content.String(), reasoning.String()
	a.msg.Finish = str(body.Get("stop_reason"))
	a.msg.Usage = anthropicUsage(body.Get("usage"), nil)
	return a
}

// anthropicUsage reads an Anthropic usage object over the counts so far
// (message_start's, when u is a message_delta's): input_tokens exclude the
// cached and cache-written tokens, which PromptTokens includes.
func anthropicUsage(u trace.Value, prev *Usage) *Usage {
	if u.Kind() != trace.Object {
		return prev
	}
	var out Usage
	if prev != nil {
		out = *prev
	}
	fresh, hasFresh := u.Get("input_tokens").Int()
	cached, hasCached := u.Get("cache_read_input_tokens").Int()
	written, hasWritten := u.Get("cache_creation_input_tokens").Int()
	if hasFresh || hasCached || hasWritten {
		if !hasFresh {
			fresh = out.PromptTokens - out.CachedTokens - out.CacheWriteTokens
		}
		if !hasCached {
			cached = out.CachedTokens
		}
		if !hasWritten {
			written = out.CacheWriteTokens
		}
		out.CachedTokens, out.CacheWriteTokens = max(cached, 0), max(written, 0)
		out.PromptTokens = max(fresh, 0) + out.CachedTokens + out.CacheWriteTokens
	}
	if n, ok := u.Get("output_tokens").Int(); ok {
		out.CompletionTokens = max(n, 0)
	}
	out.TotalTokens = out.PromptTokens + out.CompletionTokens
	if out == (Usage{}) {
		return nil
	}
	return &out
}

func anthropicStream(frames trace.Value) assembled {
	a := assembled{ok: true}
	type block struct {
		typ, id, name string
		text, json    strings.Builder
		input         trace.Value
	}
	var blocks []*block
	at := func(d trace.Value) *block {
		i := int(count(d.Get("index")))
		if i >= len(blocks) || i < 0 {
			return nil
		}
		return blocks[i]
	}
	for _, f := range frames.Elems() {
		d := f.Get("data")
		switch str(d.Get("type")) {
		case "message_start":
			m := d.Get("message")
			a.mint(mintedResponse, str(m.Get("id")))
			a.msg.Usage = anthropicUsage(m.Get("usage"), nil)
		case "content_block_start":
			i := int(count(d.Get("index")))
			for len(blocks) <= i && i < 1024 {
				blocks = append(blocks, &block{})
			}
			if i >= len(blocks) {
				continue
			}
			cb := d.Get("content_block")
			b := blocks[i]
			b.typ, b.id, b.name, b.input = str(cb.Get("type")), str(cb.Get("id")), str(cb.Get("name")), cb.Get("input")
			b.text.WriteString(str(cb.Get("text")))
			b.text.WriteString(str(cb.Get("thinking")))
		case "content_block_delta":
			b := at(d)
			if b == nil {
				continue
			}
			delta := d.Get("delta")
			switch str(delta.Get("type")) {
			case "text_delta":
				b.text.WriteString(str(delta.Get("text")))
			case "thinking_delta":
				b.text.WriteString(str(delta.Get("thinking")))
			case "input_json_delta":
				b.json.WriteString(str(delta.Get("partial_json")))
			}
		case "message_delta":
			if r := str(d.Get("delta").Get("stop_reason")); r != "" {
				a.msg.Finish = r
			}
			a.msg.Usage = anthropicUsage(d.Get("usage"), a.msg.Usage)
		}
	}
	var content, reasoning strings.Builder
	for _, b := range blocks {
		switch b.typ {
		case "text":
			content.WriteString(b.text.String())
		case "thinking":
			reasoning.WriteString(b.text.String())
		case "tool_use", "server_tool_use":
			a.mint(mintedCall, b.id)
			in := b.input
			if b.json.Len() > 0 || in.IsAbsent() {
				in = arguments(b.json.String())
			}
			a.msg.ToolCalls = append(a.msg.ToolCalls, toolCall{ID: b.id, Name: b.name, Arguments: in})
		}
	}
	a.msg.Content, a.msg.Reasoning = content.String(), reasoning.String()
	return a
}

// ---- Gemini ----

func geminiBody(body trace.Value) assembled {
	a := assembled{ok: true}
	var content, reasoning strings.Builder
	geminiChunk(&a, body, &content, &reasoning)
	a.msg.Content, a.msg.Reasoning = content.String(), reasoning.String()
	return a
}

// geminiChunk adds one GenerateContentResponse (a whole response, or one
// frame of a stream) to a.
func geminiChunk(a *assembled, r trace.Value, content, reasoning *strings.Builder) {
	if id := str(r.Get("responseId")); id != "" && !a.hasResponseID() {
		a.mint(mintedResponse, id)
	}
	for _, c := range r.Get("candidates").Elems() {
		if idx, _ := c.Get("index").Int(); idx != 0 {
			continue
		}
		for _, p := range c.Get("content").Get("parts").Elems() {
			if fc := p.Get("functionCall"); fc.Kind() == trace.Object {
				id := str(fc.Get("id"))
				a.mint(mintedCall, id)
				args := fc.Get("args")
				if args.IsAbsent() {
					args = trace.NullValue
				}
				a.msg.ToolCalls = append(a.msg.ToolCalls, toolCall{ID: id, Name: str(fc.Get("name")), Arguments: args})
				continue
			}
			if t, _ := p.Get("thought").BoolOf(); t {
				reasoning.WriteString(str(p.Get("text")))
				continue
			}
			content.WriteString(str(p.Get("text")))
		}
		if fr := str(c.Get("finishReason")); fr != "" {
			a.msg.Finish = fr
		}
		break
	}
	if u := geminiUsage(r.Get("usageMetadata")); u != nil {
		a.msg.Usage = u
	}
}

func (a *assembled) hasResponseID() bool {
	for _, m := range a.minted {
		if m.kind == mintedResponse {
			return true
		}
	}
	return false
}

// geminiUsage reads usageMetadata: promptTokenCount includes the cached
// tokens; the completion is the candidates' tokens and the thoughts'.
func geminiUsage(u trace.Value) *Usage {
	if u.Kind() != trace.Object {
		return nil
	}
	out := Usage{
		PromptTokens:     count(u.Get("promptTokenCount")) + count(u.Get("toolUsePromptTokenCount")),
		CachedTokens:     count(u.Get("cachedContentTokenCount")),
		ReasoningTokens:  count(u.Get("thoughtsTokenCount")),
		CompletionTokens: count(u.Get("candidatesTokenCount")) + count(u.Get("thoughtsTokenCount")),
		TotalTokens:      count(u.Get("totalTokenCount")),
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	if out == (Usage{}) {
		return nil
	}
	return &out
}

func geminiStream(frames trace.Value) assembled {
	a := assembled{ok: true}
	var content, reasoning strings.Builder
	for _, f := range frames.Elems() {
		if d := f.Get("data"); d.Kind() == trace.Object {
			geminiChunk(&a, d, &content, &reasoning)
		}
	}
	a.msg.Content, a.msg.Reasoning = content.String(), reasoning.String()
	return a
}
