package fork

import (
	"strings"

	"github.com/stepfork/stepfork/trace"
)

// promptOp is how a prompt change edits the system prompt.
type promptOp uint8

const (
	promptSet     promptOp = iota // replace the whole prompt (Prompt)
	promptAppend                  // add text at its end (PromptAppend)
	promptPrepend                 // add text at its start (PromptPrepend)
	promptReplace                 // replace every occurrence of a passage (PromptReplace)
)

// promptEdit is a prompt change's edit: its op, its text and, for
// promptReplace, the passage it replaces.
type promptEdit struct {
	op      promptOp
	text    string
	passage string
}

// edit is s edited; ok is false when a passage to replace is not in s.
func (e promptEdit) edit(s string) (string, bool) {
	switch e.op {
	case promptAppend:
		return s + e.text, true
	case promptPrepend:
		return e.text + s, true
	case promptReplace:
		if e.passage == "" || !strings.Contains(s, e.passage) {
			return s, false
		}
		return strings.ReplaceAll(s, e.passage, e.text), true
	}
	return e.text, true
}

// patchPrompt edits the system prompt of a request in the field the API
// reads, keeping the structure the request gave it:
//
//   - Gemini (a body with "contents" or "systemInstruction"): the text parts
//     of systemInstruction (created when absent).
//   - OpenAI Responses (a body with "input" or "instructions" and no
//     "messages"): "instructions" when it is set, else the first system or
//     developer item of "input", else a new "instructions".
//   - A "system" field (Anthropic messages, replay.Request): a string, or a
//     block array whose text blocks are edited in place (cache_control and
//     the other blocks kept).
//   - OpenAI chat completions: the first message with role system or
//     developer (its role kept; a string or an array of text parts); when
//     there is none, a system message is prepended to a raw body (one with a
//     "model"); an Anthropic body or a replay.Request gets a "system".
//
// ok is false when the edit has nowhere to act: a passage that is not in the
// prompt, or a request that is not a JSON object.
func patchPrompt(in trace.Value, provider string, e promptEdit) (trace.Value, bool) {
	if in.Kind() != trace.Object {
		return in, false
	}
	switch {
	case !in.Get("contents").IsAbsent() || !in.Get("systemInstruction").IsAbsent() || !in.Get("system_instruction").IsAbsent():
		key := "systemInstruction"
		if !in.Get("system_instruction").IsAbsent() {
			key = "system_instruction"
		}
		si := in.Get(key)
		if si.Kind() != trace.Object {
			if e.op == promptReplace {
				return in, false
			}
			return withMember(in, key, obj("parts", arrayOf(obj("text", trace.StringValue(e.text))))), true
		}
		parts, ok := editParts(si.Get("parts"), e, func(s string) trace.Value { return obj("text", trace.StringValue(s)) })
		if !ok {
			return in, false
		}
		return withMember(in, key, withMember(si, "parts", parts)), true

	case in.Get("messages").IsAbsent() && (!in.Get("input").IsAbsent() || !in.Get("instructions").IsAbsent()):
		if s, ok := in.Get("instructions").Str(); ok {
			out, ok := e.edit(s)
			return withMember(in, "instructions", trace.StringValue(out)), ok
		}
		if items := in.Get("input"); items.Kind() == trace.Array {
			if out, found, ok := editRoleItem(items, e, "input_text"); found {
				if !ok {
					return in, false
				}
				return withMember(in, "input", out), true
			}
		}
		if e.op == promptReplace {
			return in, false
		}
		return withMember(in, "instructions", trace.StringValue(e.text)), true

	case !in.Get("system").IsAbsent():
		sys := in.Get("system")
		if s, ok := sys.Str(); ok {
			out, ok := e.edit(s)
			return withMember(in, "system", trace.StringValue(out)), ok
		}
		if sys.Kind() == trace.Array {
			blocks, ok := editParts(sys, e, textBlock("text"))
			if !ok {
				return in, false
			}
			return withMember(in, "system", blocks), true
		}
		if e.op == promptReplace {
			return in, false
		}
		return withMember(in, "system", trace.StringValue(e.text)), true
	}
	if msgs := in.Get("messages"); msgs.Kind() == trace.Array {
		if out, found, ok := editRoleItem(msgs, e, "text"); found {
			if !ok {
				return in, false
			}
			return withMember(in, "messages", out), true
		}
		if e.op == promptReplace {
			return in, false
		}
		if provider != "anthropic" && !in.Get("model").IsAbsent() {
			first := obj("role", trace.StringValue("system"), "content", trace.StringValue(e.text))
			es := []trace.Value{first}
			for _, m := range msgs.Elems() {
				es = append(es, m)
			}
			out, _ := trace.ArrayValue(es...)
			return withMember(in, "messages", out), true
		}
	}
	if e.op == promptReplace {
		return in, false
	}
	return withMember(in, "system", trace.StringValue(e.text)), true
}

// editRoleItem edits the content of the first item of items whose role is
// system or developer. found is false when there is none.
func editRoleItem(items trace.Value, e promptEdit, partType string) (out trace.Value, found, ok bool) {
	es := make([]trace.Value, 0, items.Len())
	for _, m := range items.Elems() {
		if role, _ := m.Get("role").Str(); !found && (role == "system" || role == "developer") {
			found = true
			c := m.Get("content")
			if s, isStr := c.Str(); isStr {
				var t string
				t, ok = e.edit(s)
				m = withMember(m, "content", trace.StringValue(t))
			} else {
				var parts trace.Value
				if parts, ok = editParts(c, e, textBlock(partType)); ok {
					m = withMember(m, "content", parts)
				}
			}
		}
		es = append(es, m)
	}
	if !found || !ok {
		return items, found, ok
	}
	out, _ = trace.ArrayValue(es...)
	return out, true, true
}

// textBlock makes a text part of a type ("text", "input_text").
func textBlock(typ string) func(string) trace.Value {
	return func(s string) trace.Value { return obj("type", trace.StringValue(typ), "text", trace.StringValue(s)) }
}

// isTextPart reports whether p is a text part: a "text" string, and no type
// or a text type.
func isTextPart(p trace.Value) bool {
	if _, ok := p.Get("text").Str(); !ok {
		return false
	}
	switch t, _ := p.Get("type").Str(); t {
	case "", "text", "input_text":
		return true
	}
	return false
}

// editParts edits the text parts of a part array (Anthropic system blocks,
// chat content parts, Responses input_text parts, Gemini parts), keeping
// every other part and member. Replacing the whole prompt puts the text in
// the first text part and drops the other text parts (the first keeps a
// cache_control one of them had); appending edits the last, prepending the
// first; a passage is replaced in every one. An array without a text part
// gets one (newPart) unless a passage is to be replaced.
func editParts(parts trace.Value, e promptEdit, newPart func(string) trace.Value) (trace.Value, bool) {
	var es []trace.Value
	var text []int
	for i, p := range parts.Elems() {
		es = append(es, p)
		if isTextPart(p) {
			text = append(text, i)
		}
	}
	set := func(i int, f func(string) (string, bool)) bool {
		s, _ := es[i].Get("text").Str()
		out, ok := f(s)
		if ok {
			es[i] = withMember(es[i], "text", trace.StringValue(out))
		}
		return ok
	}
	ok := true
	switch {
	case len(text) == 0:
		if e.op == promptReplace {
			return parts, false
		}
		es = append(es, newPart(e.text))
	case e.op == promptSet:
		first := text[0]
		set(first, e.edit)
		cache := es[first].Get("cache_control")
		kept := es[:0:0]
		for i, p := range es {
			if i != first && isTextPart(p) {
				if c := p.Get("cache_control"); cache.IsAbsent() && !c.IsAbsent() {
					cache = c
				}
				continue
			}
			kept = append(kept, p)
		}
		es = kept
		if !cache.IsAbsent() {
			for i, p := range es {
				if isTextPart(p) {
					es[i] = withMember(p, "cache_control", cache)
					break
				}
			}
		}
	case e.op == promptAppend:
		set(text[len(text)-1], e.edit)
	case e.op == promptPrepend:
		set(text[0], e.edit)
	default:
		ok = false
		for _, i := range text {
			if set(i, e.edit) {
				ok = true
			}
		}
	}
	if !ok {
		return parts, false
	}
	out, err := trace.ArrayValue(es...)
	if err != nil {
		return parts, false
	}
	return out, true
}

// patchTemperature sets the sampling temperature where the API reads it:
// Gemini's generationConfig.temperature; a Genkit model request's
// config.temperature (contrib/genkit records "config" as an object, whatever
// the plugin's config type); else the top-level "temperature".
func patchTemperature(in trace.Value, t trace.Value) trace.Value {
	for _, key := range [...]string{"generationConfig", "generation_config"} {
		if gc := in.Get(key); gc.Kind() == trace.Object {
			return withMember(in, key, withMember(gc, "temperature", t))
		}
	}
	if !in.Get("contents").IsAbsent() {
		return withMember(in, "generationConfig", obj("temperature", t))
	}
	if c := in.Get("config"); c.Kind() == trace.Object && in.Get("messages").Kind() == trace.Array {
		return withMember(in, "config", withMember(c, "temperature", t))
	}
	return withMember(in, "temperature", t)
}

func arrayOf(vs ...trace.Value) trace.Value {
	a, _ := trace.ArrayValue(vs...)
	return a
}

// withMember returns the object o with key set to v (o itself when it is not
// an object).
func withMember(o trace.Value, key string, v trace.Value) trace.Value {
	if o.Kind() != trace.Object {
		return o
	}
	ms := make([]trace.Member, 0, o.Len()+1)
	for k, x := range o.Members() {
		if k != key {
			ms = append(ms, trace.Member{Key: k, Value: x})
		}
	}
	ms = append(ms, trace.Member{Key: key, Value: v})
	out, err := trace.ObjectValue(ms...)
	if err != nil {
		return o
	}
	return out
}
