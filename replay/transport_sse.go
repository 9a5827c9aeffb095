package replay

import (
	"bytes"
	"strings"

	"github.com/stepfork/stepfork/trace"
)

// sseParser splits a text/event-stream body into frames as the bytes go by
// (the parsing rules of the HTML server-sent events specification): lines end
// in "\n" or "\r\n"; "field: value" lines set event, id, retry or add a data
// line; a blank line ends a frame; comment lines (":…") are dropped. Bytes
// after the last blank line are kept raw as the tail.
type sseParser struct {
	line    []byte // the current line, not yet terminated
	since   []byte // raw bytes of the terminated lines of the unfinished frame
	event   string
	id      string
	retry   string
	data    []byte
	fields  bool // the unfinished frame has at least one field
	hasData bool
	frames  []trace.Value
}

// feed parses the next bytes of the stream.
func (p *sseParser) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.line = append(p.line, b...)
			return
		}
		p.line = append(p.line, b[:i+1]...)
		b = b[i+1:]
		p.since = append(p.since, p.line...)
		p.lineDone(bytes.TrimSuffix(bytes.TrimSuffix(p.line, []byte{'\n'}), []byte{'\r'}))
		p.line = p.line[:0]
	}
}

func (p *sseParser) lineDone(l []byte) {
	if len(l) == 0 {
		p.dispatch()
		return
	}
	if l[0] == ':' {
		return
	}
	field, value := l, []byte(nil)
	if i := bytes.IndexByte(l, ':'); i >= 0 {
		field, value = l[:i], bytes.TrimPrefix(l[i+1:], []byte{' '})
	}
	switch string(field) {
	case "event":
		p.event, p.fields = string(value), true
	case "id":
		p.id, p.fields = string(value), true
	case "retry":
		p.retry, p.fields = string(value), true
	case "data":
		if p.hasData {
			p.data = append(p.data, '\n')
		}
		p.data, p.hasData, p.fields = append(p.data, value...), true, true
	}
}

// dispatch ends the unfinished frame.
func (p *sseParser) dispatch() {
	if p.fields {
		var data trace.Value
		if p.hasData {
			data = frameData(p.data)
		}
		str := func(s string) trace.Value {
			if s == "" {
				return trace.Value{}
			}
			return trace.StringValue(s)
		}
		f, _ := trace.ObjectValue(
			trace.Member{Key: "event", Value: str(p.event)},
			trace.Member{Key: "id", Value: str(p.id)},
			trace.Member{Key: "retry", Value: str(p.retry)},
			trace.Member{Key: "data", Value: data})
		p.frames = append(p.frames, f)
	}
	p.event, p.id, p.retry, p.data, p.fields, p.hasData = "", "", "", p.data[:0], false, false
	p.since = p.since[:0]
}

// tail is the raw text after the last complete frame: a frame cut off by
// the end of the stream.
func (p *sseParser) tail() string { return string(p.since) + string(p.line) }

// frameData is a frame's data: JSON when it is a JSON object or array,
// otherwise the text (such as OpenAI's "[DONE]").
func frameData(b []byte) trace.Value {
	if t := bytes.TrimSpace(b); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		if v, err := trace.ParseValue(b); err == nil {
			return v
		}
	}
	return trace.StringValue(string(b))
}

// renderFrame writes a recorded frame back in the wire format.
func renderFrame(f trace.Value) []byte {
	var fields [3]string // event, id, retry
	var has [3]bool
	var data trace.Value
	for k, m := range f.Members() {
		i := -1
		switch k {
		case "data":
			data = m
		case "event":
			i = 0
		case "id":
			i = 1
		case "retry":
			i = 2
		}
		if i >= 0 {
			fields[i], has[i] = m.Str()
		}
	}
	var b []byte
	for i, k := range [...]string{"event", "id", "retry"} {
		if has[i] {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, fields[i]...)
			b = append(b, '\n')
		}
	}
	switch data.Kind() {
	case trace.Absent:
	case trace.String:
		s, _ := data.Str()
		for line := range strings.SplitSeq(s, "\n") {
			b = append(b, "data: "...)
			b = append(b, line...)
			b = append(b, '\n')
		}
	default:
		b = append(b, "data: "...)
		b = append(b, data.Canonical()...)
		b = append(b, '\n')
	}
	return append(b, '\n')
}
