package trace

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"os"
	"path/filepath"
)

// Reader streams the events of a bundle one line at a time, in memory that does
// not grow with the number of events. Open reads manifest.json and
// redactions.json up front; Events then decodes events.jsonl lazily and hashes
// its bytes on the way, so an integrity check needs no second read.
//
//	r, err := trace.Open("run.sftrace")
//	if err != nil { … }
//	defer r.Close()
//	for ev, err := range r.Events() {
//		if err != nil { … } // events.jsonl:17: invalid JSON: …
//		fmt.Println(ev.Step, ev.Type)
//	}
type Reader struct {
	path       string
	manifest   Manifest
	redactions []RedactionEntry
	f          *os.File
	lines      lineReader
	dec        eventDecoder
	done       bool

	cur   []byte // the line of the event last yielded
	curEv *Event // and that event
	skip  bool   // SkipPayloads was called
	full  *eventDecoder
}

// Open opens the bundle at path for streaming. It reads and checks
// manifest.json and redactions.json; events.jsonl is read by Events.
func Open(path string) (*Reader, error) {
	if err := checkBundleDir(path); err != nil {
		return nil, err
	}
	r := &Reader{path: path}
	var err error
	if r.manifest, err = readManifest(path); err != nil {
		return nil, err
	}
	if r.redactions, err = readRedactions(path); err != nil {
		return nil, err
	}
	name := filepath.Join(path, EventsFile)
	if err := checkRegularFile(path, EventsFile); err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	r.f = f
	r.lines.reset(f, name)
	return r, nil
}

// Path returns the bundle path given to Open.
func (r *Reader) Path() string { return r.path }

// Manifest returns the bundle's manifest.
func (r *Reader) Manifest() Manifest { return r.manifest }

// Redactions returns the entries of redactions.json.
func (r *Reader) Redactions() []RedactionEntry { return r.redactions }

// Close closes events.jsonl.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// Events iterates over the events in file order. After the first error it
// stops. The Event passed to the loop body is reused by the next iteration:
// copy it (or call Clone) to keep it.
func (r *Reader) Events() iter.Seq2[*Event, error] {
	return func(yield func(*Event, error) bool) {
		if r.done || r.f == nil {
			return
		}
		var ev Event
		r.curEv = &ev
		for {
			line, n, err := r.lines.next()
			r.cur = nil
			if err == io.EOF {
				r.done = true
				return
			}
			if err == nil {
				err = r.dec.decodeLine(line, n, r.lines.name, &ev)
			}
			if err != nil {
				r.done = true
				yield(nil, err)
				return
			}
			r.cur = line
			if r.skip {
				ev.Input, ev.Output, ev.Before, ev.After, ev.Details = Value{}, Value{}, Value{}, Value{}, Value{}
			}
			if !yield(&ev, nil) {
				return
			}
		}
	}
}

// RawLine returns the line of events.jsonl that the event last yielded by
// Events was decoded from, without its line ending. It is valid until the
// loop body returns; copy it to keep it.
func (r *Reader) RawLine() []byte { return r.cur }

// CheckSavedForm makes Events note, for every event, what SavedForm needs:
// it hashes each payload and looks for anything redaction would change,
// which costs about as much as validating the payload hashes. Call it
// before Events.
func (r *Reader) CheckSavedForm() { r.dec.track = true }

// SkipPayloads makes Events leave the payload fields (Input, Output,
// Before, After, Details) of the events it yields absent: every payload is
// still parsed, checked and hashed, but not kept, which makes reading about
// half as costly. Decode gives the current event in full when it is
// needed. Call it before Events.
func (r *Reader) SkipPayloads() { r.skip, r.dec.hashOnly = true, true }

// SavedForm reports whether the line of the event last yielded by Events
// (RawLine) is byte for byte what Save writes for that event: compact, in
// Save's key order and number formats, with payload hashes that match the
// payloads, and with nothing that redaction would change. Such a line can
// be copied into another bundle as it is (BundleWriter.WriteRaw); since the
// payload hashes do not cover run_id, it may be copied under another run id.
// It is false unless CheckSavedForm was called before Events. Bundles that
// Save or Python stepfork wrote hold only such lines, unless they were
// edited by hand.
func (r *Reader) SavedForm() bool {
	return r.cur != nil && r.dec.savedForm(r.cur, r.curEv)
}

// Decode decodes the line of the event last yielded by Events again, in
// full, into ev: with SkipPayloads, this is how to get an event's payloads.
func (r *Reader) Decode(ev *Event) error {
	if r.cur == nil {
		return fmt.Errorf("%s: Decode called outside the loop over Events", r.lines.name)
	}
	if r.full == nil {
		r.full = new(eventDecoder)
	}
	return r.full.decodeLine(r.cur, r.lines.n, r.lines.name, ev)
}

// EventsDigest returns the SHA-256 (lowercase hex) of the bytes of
// events.jsonl read so far; after Events has run to the end it is the digest
// that integrity.json records.
func (r *Reader) EventsDigest() string { return r.lines.digest() }

// Line returns the number of the last line read (1-based).
func (r *Reader) Line() int { return r.lines.n }

// decodeLine decodes line number n of the events file called name, turning
// errors into the reference's "<path>:<n>: …" messages.
func (d *eventDecoder) decodeLine(line []byte, n int, name string, ev *Event) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return &LineError{File: name, Line: n, Msg: "blank JSONL line"}
	}
	if err := d.decode(line, ev); err != nil {
		var ce *CanonicalError
		if errors.As(err, &ce) {
			msg := ce.Msg
			if len(msg) < 12 || msg[:12] != "invalid JSON" {
				msg = "invalid JSON: " + msg
			}
			msg += fmt.Sprintf(" (column %d)", ce.Off+1)
			return &LineError{File: name, Line: n, Col: ce.Off + 1, Msg: msg, Err: err}
		}
		return &LineError{File: name, Line: n, Msg: err.Error(), Err: err}
	}
	return nil
}

// LineError is an error at a line of events.jsonl. Its text is
// "<file>:<line>: <message>", as in Python stepfork.
type LineError struct {
	File string // path of the file
	Line int    // 1-based line number
	Col  int    // 1-based byte column, 0 when unknown
	Msg  string
	Err  error // the underlying error, if any
}

// Error returns the error message.
func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Unwrap returns the underlying error.
func (e *LineError) Unwrap() error { return e.Err }

// lineReader splits a file into lines, refusing lines longer than
// MaxLineBytes and a UTF-8 byte order mark, and hashes every byte read.
type lineReader struct {
	br   *bufio.Reader
	name string
	n    int
	sum  hash.Hash
	long []byte
}

func (l *lineReader) reset(r io.Reader, name string) {
	l.sum = sha256.New()
	l.br = bufio.NewReaderSize(io.TeeReader(r, l.sum), 256<<10)
	l.name, l.n = name, 0
}

func (l *lineReader) digest() string { return hex.EncodeToString(l.sum.Sum(nil)) }

// next returns the next line without its line ending ("\n" or "\r\n") and its
// number. The returned slice is valid until the next call.
func (l *lineReader) next() ([]byte, int, error) {
	line, err := l.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		l.long = append(l.long[:0], line...)
		for err == bufio.ErrBufferFull {
			if len(l.long) > MaxLineBytes+len("\r\n") {
				return nil, l.n + 1, &LineError{File: l.name, Line: l.n + 1, Msg: fmt.Sprintf("line is longer than the limit of %d bytes", MaxLineBytes)}
			}
			line, err = l.br.ReadSlice('\n')
			l.long = append(l.long, line...)
		}
		line = l.long
	}
	if err != nil && err != io.EOF {
		return nil, l.n + 1, fmt.Errorf("%s: %w", l.name, err)
	}
	if len(line) == 0 && err == io.EOF {
		return nil, l.n, io.EOF
	}
	l.n++
	if l.n == 1 && bytes.HasPrefix(line, utf8BOM) {
		return nil, l.n, &LineError{File: l.name, Line: 1, Msg: "invalid JSON: unexpected UTF-8 byte order mark; save the file as UTF-8 without a BOM"}
	}
	line = bytes.TrimSuffix(line, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) > MaxLineBytes { // the line ending does not count
		return nil, l.n, &LineError{File: l.name, Line: l.n, Msg: fmt.Sprintf("line is longer than the limit of %d bytes", MaxLineBytes)}
	}
	return line, l.n, nil
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}
