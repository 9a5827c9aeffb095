package trace

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// BundleWriter writes a bundle one event at a time, so that a bundle of any
// size is written in memory that does not grow with its events. It is what
// [Trace.Save] uses, and it suits a program that filters or rewrites a
// bundle too large to load, event by event from a [Reader].
//
// It follows Save's rules: events are redacted and hashed as Save does,
// totals are recomputed, and the files go into a temporary sibling
// directory that Close renames into place (integrity.json last, every file
// synced once); an existing bundle is replaced only with Overwrite, and is
// kept until the new one is in place. Until Close succeeds nothing is
// visible at path; Abort (or a failed Close) removes the temporary
// directory.
//
//	w, err := trace.NewBundleWriter("copy.sftrace", r.Manifest())
//	if err != nil { … }
//	for ev, err := range r.Events() {
//		if err != nil { w.Abort(); … }
//		if err := w.WriteEvent(ev); err != nil { … } // w is aborted
//	}
//	err = w.Close()
type BundleWriter struct {
	path      string
	overwrite bool
	tmp       string
	lock      *dirLock // held on tmp until the writer is done
	m         Manifest
	f         *os.File
	bw        *bufio.Writer
	sum       hash.Hash

	totals Totals // the counters of the events written (its cost is not used)

	existing []RedactionEntry // SetRedactions
	entries  []RedactionEntry // found by WriteEvent
	extras   map[string][]byte
	buf      []byte
	err      error // the first error; the writer is then aborted
	closed   bool
}

// NewBundleWriter starts writing a bundle at path with manifest m (its
// totals and, when it is empty, its status are filled in by Close). It
// checks path as Save does, before anything is written, and opens
// events.jsonl in a temporary sibling directory. Options are Save's.
func NewBundleWriter(path string, m Manifest, opts ...SaveOption) (*BundleWriter, error) {
	var cfg saveConfig
	for _, o := range opts {
		o(&cfg)
	}
	if err := checkSuffix(path); err != nil {
		return nil, err
	}
	return newBundleWriter(filepath.Clean(path), m, cfg)
}

func newBundleWriter(path string, m Manifest, cfg saveConfig) (*BundleWriter, error) {
	if err := recoverLeftovers(path); err != nil {
		return nil, err
	}
	if _, err := checkDest(path, cfg.overwrite); err != nil {
		return nil, err
	}
	tmp, lock, err := makeTemp(path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(tmp, EventsFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		os.RemoveAll(tmp)
		lock.release()
		return nil, storageErr(err, "%s: writing %s: %v", path, EventsFile, err)
	}
	w := &BundleWriter{path: path, overwrite: cfg.overwrite, tmp: tmp, lock: lock, m: m, f: f, sum: sha256.New()}
	// events.jsonl is hashed as the buffer is flushed, a block at a time.
	w.bw = bufio.NewWriterSize(io.MultiWriter(f, w.sum), 256<<10)
	return w, nil
}

// Path returns the bundle path the writer writes to.
func (w *BundleWriter) Path() string { return w.path }

// SetManifest replaces the manifest given to NewBundleWriter; Close still
// fills in the totals.
func (w *BundleWriter) SetManifest(m Manifest) { w.m = m }

// SetRedactions sets the entries redactions.json starts with (those of the
// trace being copied, for example); the entries of what WriteEvent and
// Close redact follow them, without duplicates, as in Save.
func (w *BundleWriter) SetRedactions(entries []RedactionEntry) {
	w.existing = slices.Clone(entries)
}

// SetExtra adds an extra bundle file (fork.json, for example), which Close
// writes and lists in integrity.json, as Save writes Trace.Extras.
func (w *BundleWriter) SetExtra(name string, data []byte) error {
	if !validExtraName(name) || slices.Contains(coreFiles, name) {
		return fmt.Errorf("extra bundle file name %q is not allowed", name)
	}
	if w.extras == nil {
		w.extras = map[string][]byte{}
	}
	w.extras[name] = slices.Clone(data)
	return nil
}

// WriteEvent writes ev as Save writes an event: redacted (the entries are
// kept for redactions.json), with absent payloads written as null, and
// with its payload hashes computed. ev itself is not changed. An event that
// Save would refuse aborts the writer and returns the error.
func (w *BundleWriter) WriteEvent(ev *Event) error {
	if err := w.usable(); err != nil {
		return err
	}
	red, entries, err := RedactEvent(*ev)
	if err != nil {
		// Name the event by position: its id may hold the credential.
		return w.fail(storageErr(err, "%s: event #%d (step %d): %v", w.path, w.totals.Events+1, ev.Step, err))
	}
	for _, f := range []*Value{&red.Input, &red.Output, &red.Before, &red.After, &red.Details} {
		if f.IsAbsent() && fieldIn(payloadField(f, &red), typeFields[red.Type]) {
			*f = NullValue
		}
	}
	if err := red.checkFields(); err != nil {
		return w.fail(storageErr(err, "%s: event %s (step %d): %v", w.path, red.ID, red.Step, err))
	}
	red.SetHashes()
	w.entries = append(w.entries, entries...)
	return w.writeEncoded(&red, nil)
}

// writeRaw writes line as the next line of events.jsonl: line must be what
// Save writes for the event it was decoded from (Reader.rawLine reports
// that and gives the line), and ev is that event, which the
// writer counts for the totals. The one difference allowed is the run id:
// when ev.RunID is not the run_id in line, line's run_id is rewritten to
// ev.RunID, which leaves the payload hashes valid since they do not cover
// it. A line that does not start with ev's id and a run_id, or that holds a
// line break, aborts the writer.
func (w *BundleWriter) writeRaw(ev *Event, line []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	if bytes.IndexByte(line, '\n') >= 0 || bytes.IndexByte(line, '\r') >= 0 {
		return w.fail(storageErr(nil, "%s: the copied line of event %s holds a line break", w.path, ev.ID))
	}
	w.buf = append(w.buf[:0], `{"id":`...)
	w.buf = appendQuoted(w.buf, ev.ID)
	w.buf = append(w.buf, `,"run_id":"`...)
	head := len(w.buf)
	if !bytes.HasPrefix(line, w.buf) {
		return w.fail(storageErr(nil, "%s: the copied line does not start with the id of event %s and a run_id", w.path, ev.ID))
	}
	// The run id in the line: a JSON string, whose end is the first quote
	// that no backslash escapes.
	end := head
	for end < len(line) && line[end] != '"' {
		if line[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(line) {
		return w.fail(storageErr(nil, "%s: the copied line of event %s has no run_id string", w.path, ev.ID))
	}
	w.buf = appendQuoted(w.buf[:head-1], ev.RunID)
	if bytes.Equal(w.buf[head-1:], line[head-1:end+1]) {
		return w.writeEncoded(ev, line) // the run id is already ev's
	}
	w.buf = append(w.buf, line[end+1:]...)
	return w.writeEncoded(ev, w.buf)
}

// writeEncoded writes one line of events.jsonl: line, or ev encoded when
// line is nil. ev must be as Save writes it.
func (w *BundleWriter) writeEncoded(ev *Event, line []byte) error {
	if line == nil {
		w.buf = appendEvent(w.buf[:0], ev)
		line = w.buf
	}
	if _, err := w.bw.Write(line); err != nil {
		return w.fail(storageErr(err, "%s: writing %s: %v", w.path, EventsFile, err))
	}
	if err := w.bw.WriteByte('\n'); err != nil {
		return w.fail(storageErr(err, "%s: writing %s: %v", w.path, EventsFile, err))
	}
	w.totals.Add(ev)
	return nil
}

// Events returns the number of events written so far.
func (w *BundleWriter) Events() int { return w.totals.Events }

func (w *BundleWriter) usable() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return storageErr(nil, "%s: the bundle writer is closed", w.path)
	}
	return nil
}

// fail records err, aborts the writer and returns err.
func (w *BundleWriter) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	w.Abort()
	return err
}

// Abort stops writing and removes the temporary directory; nothing is
// written at the bundle path, and an existing bundle there is untouched. It
// may be called more than once, and after Close (it then does nothing).
func (w *BundleWriter) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	if w.err == nil {
		w.err = storageErr(nil, "%s: the bundle writer was aborted", w.path)
	}
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	os.RemoveAll(w.tmp)
	w.lock.release()
}

// Close finishes the bundle: it syncs events.jsonl, writes manifest.json
// (totals recomputed, redacted as Save redacts it), redactions.json, the
// extra files and, last, integrity.json, then renames the bundle into
// place. On error nothing is left at the bundle path but what was there
// before.
func (w *BundleWriter) Close() error {
	if w.closed {
		if w.err != nil {
			return w.err
		}
		return storageErr(nil, "%s: the bundle writer is already closed", w.path)
	}
	if err := w.finishEvents(); err != nil {
		return w.fail(err)
	}
	m := w.m
	if m.Status == "" {
		m.Status = RunRunning // Python's default for a trace saved without a status
	}
	m.Totals.Events, m.Totals.LLMCalls, m.Totals.ToolCalls = w.totals.Events, w.totals.LLMCalls, w.totals.ToolCalls
	m, mentries, err := RedactManifest(m)
	if err == nil {
		err = m.check()
	}
	if err != nil {
		return w.fail(storageErr(err, "%s: manifest: %v", w.path, err))
	}
	reds := mergeRedactions(w.existing, append(w.entries, mentries...))
	var events [sha256.Size]byte
	w.sum.Sum(events[:0])
	files := []bundleFile{
		{name: ManifestFile, data: appendManifest(nil, &m)},
		{name: EventsFile, sum: &events},
		{name: RedactionsFile, data: appendRedactions(nil, reds)},
	}
	names := make([]string, 0, len(w.extras))
	for name := range w.extras {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		files = append(files, bundleFile{name: name, data: w.extras[name]})
	}
	files = append(files, bundleFile{name: IntegrityFile, data: appendIntegrity(nil, files)})
	for _, f := range files {
		if f.name == EventsFile {
			continue
		}
		if err := writeFileSync(filepath.Join(w.tmp, f.name), f.data); err != nil {
			return w.fail(storageErr(err, "%s: writing %s: %v", w.path, f.name, err))
		}
	}
	w.closed = true
	defer w.lock.release()
	return commitBundle(w.path, w.tmp, w.overwrite)
}

// finishEvents flushes, syncs and closes events.jsonl.
func (w *BundleWriter) finishEvents() error {
	err := w.bw.Flush()
	if err == nil {
		atStep("fsync " + EventsFile)
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	if err != nil {
		return storageErr(err, "%s: writing %s: %v", w.path, EventsFile, err)
	}
	return nil
}
