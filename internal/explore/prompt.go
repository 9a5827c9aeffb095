package explore

import (
	"strings"

	"github.com/stepfork/stepfork/trace"
)

// systemPrompt reads the system prompt of a recorded model request from
// the field its API reads it from, in the order fork's prompt changes look
// for it: Gemini's systemInstruction parts; an OpenAI Responses
// "instructions", or the first system or developer item of its "input"; a
// "system" field (Anthropic, replay.Request), a string or text blocks; the
// first system or developer message of an OpenAI chat "messages". The text
// parts of a prompt split in parts are joined with newlines. ok is false
// when the request has no prompt.
func systemPrompt(in trace.Value) (string, bool) {
	if in.Kind() != trace.Object {
		return "", false
	}
	switch {
	case !in.Get("contents").IsAbsent() || !in.Get("systemInstruction").IsAbsent() || !in.Get("system_instruction").IsAbsent():
		si := in.Get("systemInstruction")
		if si.IsAbsent() {
			si = in.Get("system_instruction")
		}
		return partsText(si.Get("parts"))
	case in.Get("messages").IsAbsent() && (!in.Get("input").IsAbsent() || !in.Get("instructions").IsAbsent()):
		if s, ok := in.Get("instructions").Str(); ok {
			return s, true
		}
		return roleItemText(in.Get("input"))
	case !in.Get("system").IsAbsent():
		sys := in.Get("system")
		if s, ok := sys.Str(); ok {
			return s, true
		}
		return partsText(sys)
	}
	return roleItemText(in.Get("messages"))
}

// roleItemText is the content of the first item of items whose role is
// system or developer.
func roleItemText(items trace.Value) (string, bool) {
	if items.Kind() != trace.Array {
		return "", false
	}
	for _, m := range items.Elems() {
		if role, _ := m.Get("role").Str(); role == "system" || role == "developer" {
			c := m.Get("content")
			if s, ok := c.Str(); ok {
				return s, true
			}
			return partsText(c)
		}
	}
	return "", false
}

// partsText joins the text parts of a part array.
func partsText(parts trace.Value) (string, bool) {
	if parts.Kind() != trace.Array {
		return "", false
	}
	var texts []string
	for _, p := range parts.Elems() {
		s, ok := p.Get("text").Str()
		if !ok {
			continue
		}
		switch t, _ := p.Get("type").Str(); t {
		case "", "text", "input_text":
			texts = append(texts, s)
		}
	}
	if len(texts) == 0 {
		return "", false
	}
	return strings.Join(texts, "\n"), true
}

// temperatureOf reads a recorded request's sampling temperature where fork's
// Temperature change writes it: Gemini's generationConfig, else the
// top-level "temperature".
func temperatureOf(in trace.Value) (float64, bool) {
	for _, key := range [...]string{"generationConfig", "generation_config"} {
		if gc := in.Get(key); gc.Kind() == trace.Object {
			return gc.Get("temperature").Float()
		}
	}
	return in.Get("temperature").Float()
}
