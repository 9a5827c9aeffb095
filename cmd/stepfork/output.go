package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/internal/fileform"
	"github.com/stepfork/stepfork/trace"
)

// env is where a command writes and what it knows about the terminal.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	color          bool // ANSI styles on stdout
	errTerminal    bool // stderr is a terminal: progress may be shown
}

// newEnv decides color and progress from the streams and the environment:
// color only when stdout is a terminal and NO_COLOR is unset or empty
// (https://no-color.org), or when CLICOLOR_FORCE asks for it (NO_COLOR wins);
// progress only when stderr is a terminal.
//
// Both streams pass through a redactor: whatever a command prints, human or
// machine-readable, is redacted once more on its way out.
func newEnv(stdout, stderr io.Writer, getenv func(string) string) *env {
	e := &env{stdout: &redactor{w: stdout}, stderr: &redactor{w: stderr}, getenv: getenv}
	noColor := getenv("NO_COLOR") != ""
	force := getenv("CLICOLOR_FORCE") != "" && getenv("CLICOLOR_FORCE") != "0"
	e.color = !noColor && (force || (isTerminal(stdout) && getenv("TERM") != "dumb"))
	e.errTerminal = isTerminal(stderr)
	return e
}

// flush writes out what the redactors hold of a last line without a line
// ending. run calls it when a command is done.
func (e *env) flush() {
	for _, w := range []io.Writer{e.stdout, e.stderr} {
		if r, ok := w.(*redactor); ok {
			r.flush()
		}
	}
}

// redactor is the last redaction pass of every output of the CLI: it
// applies the credential patterns of trace.RedactString to everything
// written through it, text and JSON, stdout and stderr, a line at a time
// (it holds back what follows the last line ending until more comes or
// flush). No pattern crosses a line ending or a JSON string's quote, so a
// redacted line of JSON is still JSON. Values under sensitive keys are not
// token-shaped; the commands redact payloads with redactValue before they
// print them. Files the CLI writes go through redactBytes.
type redactor struct {
	w    io.Writer
	held []byte
}

func (r *redactor) Write(p []byte) (int, error) {
	i := bytes.LastIndexAny(p, "\r\n")
	if i < 0 {
		r.held = append(r.held, p...)
		return len(p), nil
	}
	chunk := p[:i+1]
	if len(r.held) > 0 {
		chunk = append(r.held, chunk...)
	}
	_, err := r.w.Write(redactBytes(chunk))
	r.held = append(r.held[:0], p[i+1:]...)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (r *redactor) flush() {
	if len(r.held) > 0 {
		r.w.Write(redactBytes(r.held))
		r.held = r.held[:0]
	}
}

// redactBytes applies the credential patterns to b, as redactor does.
func redactBytes(b []byte) []byte {
	// RedactString only reads its argument, and b is not changed meanwhile:
	// no need to copy a large output first.
	s, hit := trace.RedactString(unsafe.String(unsafe.SliceData(b), len(b)))
	if !hit {
		return b
	}
	return []byte(s)
}

// isTerminal reports whether w is a character device (a terminal), without
// depending on golang.org/x/term.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// ANSI styles.
const (
	styleBold   = "1"
	styleDim    = "2"
	styleRed    = "31"
	styleGreen  = "32"
	styleYellow = "33"
	styleCyan   = "36"
)

// paint wraps s in an ANSI style when color is on.
func (e *env) paint(style, s string) string {
	if !e.color || s == "" {
		return s
	}
	return "\x1b[" + style + "m" + s + "\x1b[0m"
}

func (e *env) printf(format string, args ...any) { fmt.Fprintf(e.stdout, format, args...) }

func (e *env) println(s string) { fmt.Fprintln(e.stdout, s) }

// writeJSON writes one line of JSON to stdout, with the characters that
// would act on a terminal escaped (clip.InertJSON: the same JSON value).
func (e *env) writeJSON(b []byte) {
	e.stdout.Write(append(clip.InertJSON(b), '\n'))
}

// redact applies trace redaction to a string taken from a trace (or from an
// error that may quote one) before it is printed.
func redact(s string) string {
	out, _ := trace.RedactString(s)
	return out
}

// redactValue applies trace redaction to a payload before it is printed.
func redactValue(v trace.Value) trace.Value {
	out, _ := trace.RedactValue(v)
	return out
}

// clean prepares a string from a trace for a terminal: redacted, and with
// control characters (escape sequences, newlines, C1 and bidi controls are
// kept visible but inert: clip.Inert) written as Go escapes so a hostile
// trace cannot move the cursor, recolor the screen or forge lines of
// output.
func clean(s string) string { return clip.Inert(redact(s)) }

// preview returns the compact JSON of a redacted value, cut to limit runes
// with "…" (stepfork's previews: 180 for inspect details, 120 for diff).
func preview(v trace.Value, limit int) string {
	s := string(appendPyJSON(nil, redactValue(v)))
	return clip.Head(s, limit)
}

// appendPyJSON appends v as Pydantic's dump_json prints it: compact, keys
// sorted, raw UTF-8, floats in Pydantic's notation (0.00001, 1e-7). Absent is
// null.
func appendPyJSON(dst []byte, v trace.Value) []byte {
	// The canonical text differs from Pydantic's only in floats with a
	// negative exponent, so text without "e-" is copied as it is.
	if c := v.Canonical(); c != "" && !strings.Contains(c, "e-") {
		return append(dst, c...)
	}
	switch v.Kind() {
	case trace.Absent:
		return append(dst, "null"...)
	case trace.Float:
		f, _ := v.Float()
		return fileform.AppendFloat(dst, f)
	case trace.Array:
		dst = append(dst, '[')
		for i, el := range v.Elems() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendPyJSON(dst, el)
		}
		return append(dst, ']')
	case trace.Object:
		dst = append(dst, '{')
		first := true
		for k, el := range v.Members() {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendPyJSON(dst, el)
		}
		return append(dst, '}')
	}
	return append(dst, v.Canonical()...)
}

// appendJSONString appends s as a JSON string the way Python and Pydantic
// print it: raw UTF-8, only '"', '\' and control characters escaped.
func appendJSONString(dst []byte, s string) []byte {
	return append(dst, trace.StringValue(s).Canonical()...)
}

// object builds a JSON object with keys in the order they are added, the
// way Pydantic's model_dump_json prints a model.
type object struct{ buf []byte }

func newObject() *object { return &object{buf: []byte{'{'}} }

func (o *object) key(k string) *object {
	if len(o.buf) > 1 {
		o.buf = append(o.buf, ',')
	}
	o.buf = appendJSONString(o.buf, k)
	o.buf = append(o.buf, ':')
	return o
}

func (o *object) str(k, v string) *object {
	o.key(k).buf = appendJSONString(o.buf, v)
	return o
}

// optStr writes v, or null when v is "".
func (o *object) optStr(k, v string) *object {
	if v == "" {
		return o.null(k)
	}
	return o.str(k, v)
}

func (o *object) int(k string, v int64) *object {
	o.key(k).buf = strconv.AppendInt(o.buf, v, 10)
	return o
}

func (o *object) optInt(k string, p *int64) *object {
	if p == nil {
		return o.null(k)
	}
	return o.int(k, *p)
}

func (o *object) bool(k string, v bool) *object {
	o.key(k).buf = strconv.AppendBool(o.buf, v)
	return o
}

func (o *object) null(k string) *object {
	o.key(k).buf = append(o.buf, "null"...)
	return o
}

// value writes a payload in Pydantic's notation (redact it first).
func (o *object) value(k string, v trace.Value) *object {
	o.key(k).buf = appendPyJSON(o.buf, v)
	return o
}

// raw writes already encoded JSON.
func (o *object) raw(k string, b []byte) *object {
	o.key(k).buf = append(o.buf, b...)
	return o
}

func (o *object) bytes() []byte { return append(o.buf, '}') }

// array joins encoded JSON values into an array.
func array(items [][]byte) []byte {
	b := []byte{'['}
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// errorJSON is the JSON form of a command error: {"error": code, "message": …}.
func errorJSON(code, message string) []byte {
	return newObject().str("error", code).str("message", redact(message)).bytes()
}

// table renders rows as left-aligned columns separated by two spaces. Cells
// must already be cleaned; widths count runes.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(e *env) {
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string, style string) {
		var b strings.Builder
		for i, c := range cells {
			if i == len(cells)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
		}
		s := strings.TrimRight(b.String(), " ")
		if style != "" {
			s = e.paint(style, s)
		}
		e.println(s)
	}
	line(t.header, styleBold)
	for _, r := range t.rows {
		line(r, "")
	}
}

// progressThreshold is the bundle size from which long work shows progress
// on stderr (when stderr is a terminal).
const progressThreshold = 50 << 20

// progress shows "label… 3s" on a terminal's stderr, refreshed until stop.
type progress struct {
	stop func()
}

// startProgress starts showing progress for work on a bundle of size bytes
// when stderr is a terminal and the bundle is big; otherwise it does nothing.
// The returned progress must be stopped; stopping waits for the ticker
// goroutine to end and clears the line.
func (e *env) startProgress(label string, size int64) *progress {
	if !e.errTerminal || size < progressThreshold {
		return &progress{stop: func() {}}
	}
	return runProgress(e.stderr, label, size, 250*time.Millisecond)
}

func runProgress(w io.Writer, label string, size int64, every time.Duration) *progress {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	start := time.Now()
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(w, "\r%s %s (%d MB)… %ds", frames[i%len(frames)], label, size>>20, int(time.Since(start).Seconds()))
			select {
			case <-ctx.Done():
				fmt.Fprint(w, "\r\x1b[K")
				return
			case <-t.C:
			}
		}
	})
	return &progress{stop: func() { cancel(); wg.Wait() }}
}

// bundleSize is the size of a bundle's events.jsonl, the part that grows
// (0 when it cannot be read).
func bundleSize(path string) int64 {
	fi, err := os.Stat(path + string(os.PathSeparator) + trace.EventsFile)
	if err != nil {
		return 0
	}
	return fi.Size()
}
