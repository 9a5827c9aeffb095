package replay

import (
	"bytes"
	"strings"

	"github.com/stepfork/stepfork/trace"
)

// sseParser splits a text/event-stream body into frames as the bytes go by
// (the parsing rules of the HTML server-sent events specification): lines end
// in "\n", "\r\n" or "\r"; "field: value" lines set event, id, retry or add a data
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
	has     [3]bool // event, id and retry lines were seen (even with empty values)
	afterCR bool    // the last line ended in "\r": a "\n" next is part of its ending
	frames  []trace.Value
}

// feed parses the next bytes of the stream. Lines end in "\r\n", "\n" or a
// lone "\r", as the specification says; a "\r" that ends one read and a
// "\n" that starts the next are one line ending.
func (p *sseParser) feed(b []byte) {
	for len(b) > 0 {
		if p.afterCR {
			p.afterCR = false
			if b[0] == '\n' {
				if len(p.since) > 0 { // else the line dispatched its frame
					p.since = append(p.since, '\n')
				}
				b = b[1:]
				continue
			}
		}
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			p.line = append(p.line, b...)
			return
		}
		content := len(p.line) + i
		p.line = append(p.line, b[:i+1]...)
		if b[i] == '\r' {
			p.afterCR = true
		}
		b = b[i+1:]
		p.since = append(p.since, p.line...)
		p.lineDone(p.line[:content])
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
		p.event, p.fields, p.has[0] = string(value), true, true
	case "id":
		p.id, p.fields, p.has[1] = string(value), true, true
	case "retry":
		p.retry, p.fields, p.has[2] = string(value), true, true
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
		str := func(seen bool, s string) trace.Value {
			if !seen {
				return trace.Value{}
			}
			return trace.StringValue(s)
		}
		f, _ := trace.ObjectValue(
			trace.Member{Key: "event", Value: str(p.has[0], p.event)},
			trace.Member{Key: "id", Value: str(p.has[1], p.id)},
			trace.Member{Key: "retry", Value: str(p.has[2], p.retry)},
			trace.Member{Key: "data", Value: data})
		p.frames = append(p.frames, f)
	}
	p.event, p.id, p.retry, p.data, p.fields, p.hasData, p.has = "", "", "", p.data[:0], false, false, [3]bool{}
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
