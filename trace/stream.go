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
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stepfork/stepfork/internal/readlimit"
)

// Reader streams the events of a bundle one line at a time, in memory that does
// not grow with the number of events. [Open] reads manifest.json and
// redactions.json up front; [Reader.Events] then decodes events.jsonl lazily.
//
//	r, err := trace.Open("run.sftrace", trace.SkipPayloads())
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
	b          *bundle   // the bundle, opened once
	f          io.Reader // its events.jsonl; nil once closed
	lines      lineReader
	dec        eventDecoder
	done       bool

	cur      []byte      // the line of the event last yielded
	curEv    *Event      // and that event
	curLine  int         // and its line number
	curSaved bool        // and, decoding on workers, whether it is in saved form
	curSums  payloadSums // and, decoding on workers, its payload digests
	curOff   int64       // and, with digestCalls, the offset of its line
	skip     bool        // opened with SkipPayloads
	full     *eventDecoder
	workers  int // opened with Workers
}

// OpenOption configures [Open].
type OpenOption func(*openConfig)

type openConfig struct {
	skipPayloads bool
	savedForm    bool // note, for every event, whether its line is in saved form
	sums         bool // hash every payload as it is read (sumPayloads)
	digest       bool // hash events.jsonl while it is read (eventsDigest)
	calls        bool // digestCalls
	workers      int
}

// SkipPayloads makes [Reader.Events] leave the payload fields (Input,
// Output, Before, After, Details) of the events it yields absent: every
// payload is still parsed, checked and hashed, but not kept, which makes
// reading about half as costly. [Reader.Decode] gives the current event in
// full when it is needed.
func SkipPayloads() OpenOption { return func(c *openConfig) { c.skipPayloads = true } }

// Workers makes [Reader.Events] decode lines on n goroutines
// (runtime.GOMAXPROCS(0) uses every core), as [ValidateBundle] does: one
// goroutine cuts events.jsonl into batches of lines, the workers decode
// them, and Events yields the events in file order, exactly as without
// workers. Memory stays bounded by the batches in flight; when the loop
// stops early, reading stops within a few batches and every goroutine has
// ended by the time Events returns, and Events yields nothing more after
// that. With n below two, lines are decoded on the caller's goroutine.
func Workers(n int) OpenOption { return func(c *openConfig) { c.workers = n } }

// checkSavedForm makes Events note, for every event, whether its line is in
// saved form (Reader.savedForm): it hashes each payload and looks for
// anything redaction would change, which costs about as much as validating
// the payload hashes.
func checkSavedForm() OpenOption { return func(c *openConfig) { c.savedForm = true } }

// sumPayloads makes Events hash every payload it reads, keeping it:
// Reader.payloadSums then gives the digests of the event last yielded.
func sumPayloads() OpenOption { return func(c *openConfig) { c.sums = true } }

// digestCalls makes Events leave out the payloads of calls and their
// results where a digest can stand for them (see eventDecoder.elide);
// Reader.payloadSums then gives the digests of what was left out, and
// Reader.lineOffset where the line is.
func digestCalls() OpenOption { return func(c *openConfig) { c.calls = true } }

// hashEvents makes Events hash events.jsonl while it reads it, so that
// eventsDigest needs no second read.
func hashEvents() OpenOption { return func(c *openConfig) { c.digest = true } }

// Open opens the bundle at path for streaming. It reads and checks
// manifest.json and redactions.json; events.jsonl is read by
// [Reader.Events], as opts say ([SkipPayloads], [Workers]).
func Open(path string, opts ...OpenOption) (*Reader, error) {
	var cfg openConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	b, err := openBundle(path)
	if err != nil {
		return nil, err
	}
	r, err := openReader(b, path, cfg)
	if err != nil {
		b.Close()
		return nil, err
	}
	return r, nil
}

// openReader is Open of the opened bundle b, which the Reader closes.
func openReader(b *bundle, path string, cfg openConfig) (*Reader, error) {
	r := &Reader{path: path, b: b}
	var err error
	if r.manifest, err = readManifest(b); err != nil {
		return nil, err
	}
	if r.redactions, err = readRedactions(b); err != nil {
		return nil, err
	}
	f, err := b.events()
	if err != nil {
		return nil, err
	}
	r.f = f
	size := int64(-1)
	if m, err := b.file(EventsFile); err == nil {
		size = m.size
	}
	r.lines.reset(f, b.where(EventsFile), size)
	if !cfg.digest && !b.packed { // a packed bundle's events cannot be read again
		r.lines.src.skipDigest()
	}
	r.workers = cfg.workers
	r.dec.track, r.dec.sum = cfg.savedForm, cfg.sums
	if cfg.skipPayloads {
		r.skip, r.dec.hashOnly = true, true
	}
	if cfg.calls {
		r.dec.hashOnly, r.dec.digest = true, true
	}
	return r, nil
}

// Path returns the bundle path given to Open.
func (r *Reader) Path() string { return r.path }

// Manifest returns the bundle's manifest.
func (r *Reader) Manifest() Manifest { return r.manifest }

// Redactions returns the entries of redactions.json.
func (r *Reader) Redactions() []RedactionEntry { return r.redactions }

// Close closes the files of the bundle. A packed bundle whose events were
// not read to their end is read to the end of its archive first: the error
// is that of an archive that holds more than its bundle (see
// [PackedSuffix]), as reading the events to their end would have been.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	r.f = nil
	var err error
	if r.b.pr != nil {
		if err = r.b.pr.finish(); err != nil {
			err = storageErr(err, "%s", err.Error())
		}
	}
	return errors.Join(err, r.b.Close())
}

// Events iterates over the events in file order. After the first error it
// stops. The Event passed to the loop body is reused by the next iteration:
// copy it (or call Clone) to keep it.
func (r *Reader) Events() iter.Seq2[*Event, error] {
	if r.workers > 1 {
		return r.eventsOnWorkers
	}
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
				if r.dec.digest {
					if r.full == nil {
						r.full = new(eventDecoder)
					}
					r.curSums, err = r.dec.elide(line, n, r.lines.name, &ev, r.full)
					r.curOff = r.lines.start
				} else {
					err = r.dec.decodeLine(line, n, r.lines.name, &ev)
				}
			}
			if err != nil {
				r.done = true
				yield(nil, err)
				return
			}
			r.cur, r.curLine = line, n
			if r.skip {
				ev.Input, ev.Output, ev.Before, ev.After, ev.Details = Value{}, Value{}, Value{}, Value{}, Value{}
			}
			if !yield(&ev, nil) {
				return
			}
		}
	}
}

// rawLine returns the line of events.jsonl that the event last yielded by
// Events was decoded from, without its line ending, and whether that line
// is in saved form: byte for byte what Save writes for that event (compact,
// in Save's key order and number formats, with payload hashes that match
// the payloads, and with nothing that redaction would change). Such a line
// can be copied into another bundle as it is (BundleWriter.writeRaw); since
// the payload hashes do not cover run_id, it may be copied under another
// run id. saved is false unless the Reader was opened with checkSavedForm.
// Bundles that Save or Python stepfork wrote hold only such lines, unless
// they were edited by hand. The line is valid until the loop body returns.
func (r *Reader) rawLine() (line []byte, saved bool) {
	if r.cur == nil {
		return nil, false
	}
	if r.workers > 1 {
		return r.cur, r.curSaved
	}
	return r.cur, r.dec.savedForm(r.cur, r.curEv)
}

// payloadSums returns the payload digests of the event last yielded by
// Events, when the decoder hashes them (hash-only, sumPayloads or
// checkSavedForm; zero otherwise).
func (r *Reader) payloadSums() payloadSums {
	if r.workers > 1 || r.dec.digest {
		return r.curSums
	}
	return payloadSums{in: r.dec.sums[0], out: r.dec.sums[1]}
}

// Decode decodes the line of the event last yielded by [Reader.Events]
// again, in full, into ev: with [SkipPayloads], this is how to get an
// event's payloads.
func (r *Reader) Decode(ev *Event) error {
	if r.cur == nil {
		return fmt.Errorf("%s: Decode called outside the loop over Events", r.lines.name)
	}
	if r.full == nil {
		r.full = new(eventDecoder)
	}
	return r.full.decodeLine(r.cur, r.curLine, r.lines.name, ev)
}

// eventsDigest returns the SHA-256 (lowercase hex) of the bytes of
// events.jsonl read so far; after Events has run to the end it is the digest
// that integrity.json records. Without hashEvents it reads those bytes again
// from the file opened, and returns "" if that fails or the Reader was
// closed.
func (r *Reader) eventsDigest() string {
	return r.lines.src.digest(r.b)
}

// lineOffset returns the offset in events.jsonl of the line of the event
// last yielded by Events, when it was opened with digestCalls.
func (r *Reader) lineOffset() int64 { return r.curOff }

// line returns the number of the line of the event last yielded by Events
// (1-based); without workers, the number of the last line read.
func (r *Reader) line() int {
	if r.workers > 1 {
		return r.curLine
	}
	return r.lines.n
}

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
	max  int // the longest line read: MaxLineBytes, or the process's budget
	hint string
	br   *bufio.Reader
	src  digestReader
	name string
	size int64 // the file's size, -1 if unknown
	n    int
	long []byte // a line longer than br's buffer
	scan []byte // scratch for lineLength
	// start is the offset in the file of the line next returned last, off
	// that of the line after it.
	start, off int64
}

// lineLength returns the length of the line that starts have bytes before
// the next unread byte of the file, its line ending included, found by
// reading ahead at an offset (the file read twice, from the page cache,
// rather than a buffer grown again and again: a line then costs its size in
// memory once). It returns 0 when the file cannot be read at an offset, and
// stops counting past the limit of a line.
func (l *lineReader) lineLength(have int) int {
	ra, ok := l.src.r.(io.ReaderAt)
	if !ok {
		return 0
	}
	if l.scan == nil {
		l.scan = make([]byte, 256<<10)
	}
	off := l.src.offset()
	n := have
	for n <= l.max+len("\r\n") {
		k, err := ra.ReadAt(l.scan, off)
		if i := bytes.IndexByte(l.scan[:k], '\n'); i >= 0 {
			return n + i + 1
		}
		n += k
		off += int64(k)
		if err != nil {
			return n // the last line, without a line ending
		}
	}
	return n
}

// reset starts reading r, the file name of size bytes (-1 if unknown). A
// file smaller than the reading buffer gets one of its own size: a test
// loads many small bundles, and a buffer is cleared when it is made.
func (l *lineReader) reset(r io.Reader, name string, size int64) {
	l.max, l.hint = maxLine()
	l.src = digestReader{r: r, sum: sha256.New()}
	buf := 256 << 10
	if size >= 0 && size < int64(buf) {
		buf = max(int(size)+1, 4<<10)
	}
	l.br = bufio.NewReaderSize(&l.src, buf)
	l.name, l.size, l.n = name, size, 0
	l.start, l.off = 0, 0
}

// digest returns the hex SHA-256 of the bytes read so far from a reader
// that was not told to skip the digest.
func (l *lineReader) digest() string { return l.src.digest(nil) }

// digestReader reads a file, counting the bytes read and, unless told to
// skip it, hashing them. Its lock lets eventsDigest run while a goroutine
// of Workers reads.
type digestReader struct {
	mu   sync.Mutex
	r    io.Reader
	sum  hash.Hash // nil after skipDigest
	read int64
}

func (d *digestReader) Read(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, err := d.r.Read(p)
	d.read += int64(n)
	if d.sum != nil {
		d.sum.Write(p[:n])
	}
	return n, err
}

// offset returns the number of bytes read so far: the offset of the next
// byte to read.
func (d *digestReader) offset() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.read
}

func (d *digestReader) skipDigest() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.read == 0 {
		d.sum = nil
	}
}

// digest returns the hex SHA-256 of the bytes read so far: the running
// sum, or without one, the sum of those bytes read again from events.jsonl
// of b, a bundle directory's (the file still open, even if Close was
// called); "" when there is neither.
func (d *digestReader) digest(b *bundle) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sum != nil {
		return hex.EncodeToString(d.sum.Sum(nil))
	}
	if b == nil {
		return ""
	}
	m := b.files[EventsFile]
	if m == nil || m.f == nil {
		return ""
	}
	from := io.NewSectionReader(m.f, 0, d.read)
	h := sha256.New()
	if n, err := io.Copy(h, from); err != nil || n != d.read {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// next returns the next line without its line ending ("\n" or "\r\n") and its
// number. The returned slice is valid until the next call.
func (l *lineReader) next() ([]byte, int, error) {
	if cap(l.long) > 4<<20 {
		l.long = nil // hold no long line's memory past the line
	}
	line, err := l.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		n := l.lineLength(len(line))
		if n > l.max+len("\r\n") {
			return nil, l.n + 1, l.tooLong(l.n + 1)
		}
		if n > cap(l.long) {
			l.long = make([]byte, 0, n)
		}
		l.long = append(l.long[:0], line...)
		for err == bufio.ErrBufferFull {
			if len(l.long) > l.max+len("\r\n") {
				return nil, l.n + 1, l.tooLong(l.n + 1)
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
	l.start, l.off = l.off, l.off+int64(len(line))
	l.n++
	if l.n == 1 && bytes.HasPrefix(line, utf8BOM) {
		return nil, l.n, &LineError{File: l.name, Line: 1, Msg: "invalid JSON: unexpected UTF-8 byte order mark; save the file as UTF-8 without a BOM"}
	}
	// By hand: bytes.TrimSuffix compares with memeqbody, a call per byte.
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > l.max { // the line ending does not count
		return nil, l.n, l.tooLong(l.n)
	}
	return line, l.n, nil
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// tooLong is the error of line n, longer than the limit.
func (l *lineReader) tooLong(n int) error {
	msg := fmt.Sprintf("line is longer than the limit of %d bytes", l.max)
	if l.hint != "" {
		msg += "; " + l.hint
	}
	return &LineError{File: l.name, Line: n, Msg: msg}
}

// lineBudget is the longest line the process reads, when lower than
// MaxLineBytes, and what to say about it: the budget of a command of
// stepfork (internal/readlimit), which reads less than the library.
var lineBudget atomic.Pointer[struct {
	max  int
	hint string
}]

func maxLine() (int, string) {
	if b := lineBudget.Load(); b != nil {
		return b.max, b.hint
	}
	return MaxLineBytes, ""
}

func init() {
	readlimit.RegisterMaxLine(func(n int, hint string) {
		if n <= 0 || n >= MaxLineBytes {
			lineBudget.Store(nil)
			return
		}
		lineBudget.Store(&struct {
			max  int
			hint string
		}{n, hint})
	})
}

// linesPerBatch is how many lines of events.jsonl a worker (Workers)
// decodes at a time.
const linesPerBatch = 128

// lineBatch is a run of consecutive lines of events.jsonl and, once a
// worker (Workers) has decoded them, their events.
type lineBatch struct {
	data   []byte
	ends   []int   // end of each line in data
	offs   []int64 // offset of each line in the file (with digestCalls)
	first  int     // number of the first line
	events []Event
	saved  []bool        // whether each line is in saved form (with checkSavedForm)
	sums   []payloadSums // payload digests of each event (hash-only decoding)
	n      int           // events decoded without error
	err    error         // the first error of the batch, decoding before reading
	ready  chan struct{}
}

// line returns the i-th line of the batch.
func (b *lineBatch) line(i int) []byte {
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.data[start:b.ends[i]]
}

// decode decodes the lines of the batch with d, as Events would one by one
// (with digestCalls, full decodes what d leaves whole).
func (b *lineBatch) decode(d, full *eventDecoder, name string, skip bool) {
	k := len(b.ends)
	b.events = slices.Grow(b.events[:0], k)[:k]
	b.saved = slices.Grow(b.saved[:0], k)[:k]
	b.sums = slices.Grow(b.sums[:0], k)[:k]
	for i := range k {
		ev, line := &b.events[i], b.line(i)
		if d.digest {
			sums, err := d.elide(line, b.first+i, name, ev, full)
			if err != nil {
				b.n, b.err = i, err
				return
			}
			b.saved[i], b.sums[i] = false, sums
			continue
		}
		if err := d.decodeLine(line, b.first+i, name, ev); err != nil {
			b.n, b.err = i, err
			return
		}
		b.saved[i] = d.track && d.savedForm(line, ev)
		b.sums[i] = payloadSums{in: d.sums[0], out: d.sums[1]} // zero unless hash-only
		if skip {
			ev.Input, ev.Output, ev.Before, ev.After, ev.Details = Value{}, Value{}, Value{}, Value{}, Value{}
		}
	}
	b.n = k
}

// eventsOnWorkers is Events with Workers(n), n > 1.
func (r *Reader) eventsOnWorkers(yield func(*Event, error) bool) {
	if r.done || r.f == nil {
		return
	}
	r.done = true // what is read ahead is lost if the loop stops early
	inFlight := 2 * r.workers
	free := make(chan *lineBatch, inFlight)
	for range inFlight {
		free <- &lineBatch{ready: make(chan struct{}, 1)}
	}
	// Every batch is in exactly one place, so sends on these never block.
	work := make(chan *lineBatch, inFlight)
	order := make(chan *lineBatch, inFlight)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// However the loop ends (even by a panic in its body), the reader
	// stops and every goroutine has ended before Events returns.
	defer func() {
		close(stop)
		wg.Wait()
		r.cur, r.curEv, r.curSaved = nil, nil, false
	}()
	name, hashOnly, track, skip, digest, borrow := r.lines.name, r.dec.hashOnly, r.dec.track, r.skip, r.dec.digest, r.dec.borrow
	for range r.workers {
		wg.Go(func() {
			d := eventDecoder{hashOnly: hashOnly, track: track, digest: digest, borrow: borrow}
			var full *eventDecoder
			if digest {
				full = new(eventDecoder)
			}
			for b := range work {
				b.decode(&d, full, name, skip)
				b.ready <- struct{}{}
			}
		})
	}
	wg.Go(func() {
		defer close(work)
		defer close(order)
		// A batch's buffer is sized for what the previous batch held,
		// so that the batches in flight do not each grow theirs line by
		// line (five times their size allocated on the way). The first
		// is sized for the file when it is small.
		size := 0
		if r.lines.size >= 0 {
			size = int(min(r.lines.size, 64<<10))
		}
		for {
			var b *lineBatch
			select {
			case <-stop:
				return
			case b = <-free:
			}
			if cap(b.data) < size {
				b.data = make([]byte, 0, size+size/8)
			}
			b.data, b.ends, b.offs, b.err = b.data[:0], b.ends[:0], b.offs[:0], nil
			last := false
			for len(b.ends) < linesPerBatch {
				line, n, err := r.lines.next()
				if err == io.EOF {
					last = true
					break
				}
				if err != nil {
					b.err, last = err, true
					break
				}
				if len(b.ends) == 0 {
					b.first = n
				}
				b.data = append(b.data, line...)
				b.ends = append(b.ends, len(b.data))
				if digest {
					b.offs = append(b.offs, r.lines.start)
				}
			}
			size = max(size, min(len(b.data), 3<<20)) // within what is kept (4 MiB)
			order <- b
			work <- b
			if last {
				return
			}
		}
	})
	for b := range order {
		<-b.ready
		for i := range b.n {
			r.cur, r.curEv, r.curSaved, r.curLine = b.line(i), &b.events[i], b.saved[i], b.first+i
			r.curSums = b.sums[i]
			if digest {
				r.curOff = b.offs[i]
			}
			if !yield(r.curEv, nil) {
				return
			}
		}
		r.cur = nil
		if b.err != nil {
			yield(nil, b.err)
			return
		}
		if cap(b.data) > 4<<20 {
			b.data = nil // hold no long line's memory past its batch
		}
		free <- b
	}
}
