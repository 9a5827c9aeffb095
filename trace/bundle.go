package trace

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// The files of a bundle.
const (
	ManifestFile   = "manifest.json"
	EventsFile     = "events.jsonl"
	RedactionsFile = "redactions.json"
	IntegrityFile  = "integrity.json"
)

// coreFiles are the files every bundle must have, in the order integrity.json
// lists them.
var coreFiles = []string{ManifestFile, EventsFile, RedactionsFile}

// ErrStorage is matched (errors.Is) by every error of Load, Open and Save that
// concerns the bundle on disk: a wrong suffix, a missing or malformed file, a
// destination that cannot be replaced.
var ErrStorage = errors.New("trace storage error")

// storageError wraps a message so that it matches ErrStorage and, when given,
// an underlying error.
type storageError struct {
	msg string
	err error
}

func (e *storageError) Error() string { return e.msg }

func (e *storageError) Unwrap() []error {
	if e.err != nil {
		return []error{ErrStorage, e.err}
	}
	return []error{ErrStorage}
}

func storageErr(err error, format string, args ...any) error {
	return &storageError{msg: fmt.Sprintf(format, args...), err: err}
}

// Trace is a whole run in memory: the manifest, the events in order, the
// entries of redactions.json, and any extra files the bundle carries.
type Trace struct {
	Manifest
	Events     []Event
	Redactions []RedactionEntry
	// Extras holds additional bundle files by name (fork.json, for example).
	// Save writes them and lists them in integrity.json, so that integrity
	// verification covers them; Load reads back every extra file that
	// integrity.json lists.
	Extras map[string][]byte
	// Path is where the trace was loaded from or last saved to.
	Path string
}

// Clone returns a deep copy of tr.
func (tr *Trace) Clone() *Trace {
	c := *tr
	c.Events = make([]Event, len(tr.Events))
	for i := range tr.Events {
		c.Events[i] = tr.Events[i].Clone()
	}
	c.Redactions = slices.Clone(tr.Redactions)
	if tr.Failure != nil {
		f := *tr.Failure
		c.Failure = &f
	}
	c.Totals.CostUSD = clonePtr(tr.Totals.CostUSD)
	c.Totals.DurationMS = clonePtr(tr.Totals.DurationMS)
	if tr.Extras != nil {
		c.Extras = make(map[string][]byte, len(tr.Extras))
		for k, v := range tr.Extras {
			c.Extras[k] = slices.Clone(v)
		}
	}
	return &c
}

// Event returns the event with the given id and its index, or nil and -1.
func (tr *Trace) Event(id string) (*Event, int) {
	for i := range tr.Events {
		if tr.Events[i].ID == id {
			return &tr.Events[i], i
		}
	}
	return nil, -1
}

// checkSuffix enforces the bundle naming rule.
func checkSuffix(path string) error {
	if !strings.HasSuffix(strings.TrimRight(path, `/\`), ".sftrace") {
		return storageErr(nil, "trace bundle path must end with .sftrace: %s", path)
	}
	return nil
}

func readManifest(b *bundle) (Manifest, error) {
	data, err := b.read(ManifestFile)
	if err != nil {
		return Manifest{}, err
	}
	m, err := parseManifest(b.where(ManifestFile), data)
	if err != nil {
		return m, storageErr(err, "%s", err.Error())
	}
	return m, nil
}

// Load reads a whole bundle into memory. It reads manifest.json, then
// events.jsonl, then redactions.json, and stops at the first error, which
// names the file (and the line for events.jsonl). Load does not check
// integrity.json; use [LoadVerified], [VerifyIntegrity] or [ValidateBundle]
// for that.
func Load(path string) (*Trace, error) {
	tr, _, err := load(path, false, nil)
	return tr, err
}

// LoadVerified is [Load] and [VerifyIntegrity] of one reading of the
// bundle: the digests checked are those of the bytes loaded, so a file
// changed between a Load and a VerifyIntegrity cannot pass unseen, and the
// bundle is opened and read once. The error is Load's; the result is what
// VerifyIntegrity gives for the same bytes.
func LoadVerified(path string) (*Trace, IntegrityResult, error) {
	return load(path, true, nil)
}

// load is Load, and with verify the integrity of the bytes it read. With
// notes it also notes which events have the payload hashes of their
// payloads (loadNotes).
func load(path string, verify bool, notes *loadNotes) (*Trace, IntegrityResult, error) {
	var opts []OpenOption
	if verify {
		opts = append(opts, hashEvents())
	}
	if notes != nil {
		opts = append(opts, sumPayloads())
		notes.all = true
	}
	r, err := Open(path, opts...)
	if err != nil {
		return nil, IntegrityResult{}, err
	}
	defer r.Close()
	tr := &Trace{Manifest: r.manifest, Redactions: r.redactions, Path: path}
	if r.manifest.Totals.Events > 0 && r.manifest.Totals.Events < 1<<20 {
		tr.Events = make([]Event, 0, r.manifest.Totals.Events)
	}
	for ev, err := range r.Events() {
		if err != nil {
			return nil, IntegrityResult{}, storageErr(err, "%s", err.Error())
		}
		if notes != nil {
			notes.add(r.payloadSums(), ev, len(tr.Events))
		}
		tr.Events = append(tr.Events, *ev)
	}
	if tr.Extras, err = r.b.extras(); err != nil {
		return nil, IntegrityResult{}, err
	}
	var res IntegrityResult
	if verify {
		res = verifyBundle(r.b, map[string]string{EventsFile: r.eventsDigest()})
	}
	return tr, res, nil
}

// loadNotes are what a load that hashes every payload it reads learns of
// the events (rawline.LoadVerified): hashed has bit i set when event i's
// stored payload hashes are the hashes of its payloads (as Validate's
// CheckIntegrity checks them), and all says so of every event.
type loadNotes struct {
	hashed []uint64
	all    bool
}

// add notes event i, just read as ev, whose payloads have the digests sums.
func (n *loadNotes) add(sums payloadSums, ev *Event, i int) {
	if i/64 >= len(n.hashed) {
		n.hashed = append(n.hashed, 0)
	}
	if sums.stored(ev) {
		n.hashed[i/64] |= 1 << (i % 64)
	} else {
		n.all = false
	}
}

// loadHashed is LoadVerified that also returns what it noted of the
// events' payload hashes (loadNotes), for package rawline.
func loadHashed(path string) (*Trace, IntegrityResult, []uint64, bool, error) {
	var notes loadNotes
	tr, res, err := load(path, true, &notes)
	return tr, res, notes.hashed, notes.all, err
}

// validExtraName reports whether name may be an extra bundle file: a plain
// file name, not hidden, not one of the four standard files.
func validExtraName(name string) bool {
	return name != "" && name != IntegrityFile && !strings.HasPrefix(name, ".") &&
		!strings.ContainsAny(name, `/\`) && filepath.Base(name) == name
}

// SaveOption configures Save.
type SaveOption func(*saveConfig)

type saveConfig struct {
	overwrite bool
}

// Overwrite lets Save replace an existing bundle. On Linux the new bundle
// and the old one are swapped in one step, so that the path holds a complete
// bundle, the old or the new, at every instant, even if the process is
// killed; elsewhere the old bundle is moved to a backup for the instant
// between two renames, and a crash there is repaired by the next save of
// the path, which restores the backup. If anything fails, the old bundle is
// where it was.
func Overwrite() SaveOption { return func(c *saveConfig) { c.overwrite = true } }

// Prepared returns the trace exactly as Save would write it: totals
// recomputed, manifest and events redacted, payload hashes computed (absent
// payloads become null, since every field is written), and redaction entries
// merged. tr is not changed.
func (tr *Trace) Prepared() (*Trace, error) {
	out := tr.Clone()
	if out.Status == "" {
		out.Status = RunRunning // Python's default for a trace saved without a status
	}
	t := TotalsOf(out.Events)
	out.Totals.Events, out.Totals.LLMCalls, out.Totals.ToolCalls = t.Events, t.LLMCalls, t.ToolCalls
	var entries []RedactionEntry
	for i := range out.Events {
		ev := &out.Events[i]
		red, es, err := RedactEvent(*ev)
		if err != nil {
			// Name the event by position: its id may hold the credential.
			return nil, fmt.Errorf("event #%d (step %d): %w", i+1, ev.Step, err)
		}
		*ev = red
		entries = append(entries, es...)
		for _, f := range []*Value{&ev.Input, &ev.Output, &ev.Before, &ev.After, &ev.Details} {
			if f.IsAbsent() && fieldIn(payloadField(f, ev), typeFields[ev.Type]) {
				*f = NullValue
			}
		}
		if err := ev.checkFields(); err != nil {
			return nil, fmt.Errorf("event %s (step %d): %w", ev.ID, ev.Step, err)
		}
		ev.SetHashes()
	}
	m, mentries, err := RedactManifest(out.Manifest)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	out.Manifest = m
	if err := out.Manifest.check(); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	entries = append(entries, mentries...)
	out.Redactions = mergeRedactions(out.Redactions, entries)
	for name := range out.Extras {
		if !validExtraName(name) || slices.Contains(coreFiles, name) {
			return nil, fmt.Errorf("extra bundle file name %q is not allowed", name)
		}
	}
	return out, nil
}

// payloadField maps a pointer to one of ev's payload fields to its field id.
func payloadField(p *Value, ev *Event) eventField {
	switch p {
	case &ev.Input:
		return fInput
	case &ev.Output:
		return fOutput
	case &ev.Before:
		return fBefore
	case &ev.After:
		return fAfter
	}
	return fDetails
}

// mergeRedactions keeps existing entries first and adds new ones, without
// duplicates on (event_id, path, reason).
func mergeRedactions(old, add []RedactionEntry) []RedactionEntry {
	type k struct{ id, path, reason string }
	seen := map[k]bool{}
	out := make([]RedactionEntry, 0, len(old)+len(add))
	for _, e := range slices.Concat(old, add) {
		key := k{e.EventID, e.Path, e.Reason}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, e)
	}
	return out
}

type bundleFile struct {
	name string
	data []byte
	sum  *[sha256.Size]byte // the digest of data, when known
}

// digest returns the SHA-256 of the file's bytes.
func (f *bundleFile) digest() [sha256.Size]byte {
	if f.sum != nil {
		return *f.sum
	}
	return sha256.Sum256(f.data)
}

// Save writes the trace as a bundle directory at path.
//
// It recomputes totals, redacts the manifest and every event, computes every
// payload hash (replacing whatever hashes the events held), and writes
// manifest.json, events.jsonl, redactions.json, the Extras and, last,
// integrity.json into a temporary sibling directory, syncs every file, and
// renames the directory into place. An existing bundle is replaced only with
// Overwrite, which says how; on failure the old bundle is where it was.
// First, Save deals with what killed saves of the same path left beside it:
// their temporary directories are removed, and a backup is restored when
// the path is missing. tr itself is not changed except
// for Path, which is set to path on success; so, like any method that changes
// a Trace, Save must not run concurrently with other uses of the same Trace
// (save a Clone instead). Save streams events.jsonl through a BundleWriter,
// so the encoded events are never all in memory at once.
func (tr *Trace) Save(path string, opts ...SaveOption) error {
	var cfg saveConfig
	for _, o := range opts {
		o(&cfg)
	}
	if err := checkSuffix(path); err != nil {
		return err
	}
	path = filepath.Clean(path)
	prep, err := tr.Prepared()
	if err != nil {
		return storageErr(err, "%s: %v", path, err)
	}
	w, err := newBundleWriter(path, prep.Manifest, cfg)
	if err != nil {
		return err
	}
	w.existing = prep.Redactions
	w.extras = prep.Extras
	for i := range prep.Events {
		if err := w.writeEncoded(&prep.Events[i], nil); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	tr.Path = path
	return nil
}

// checkDest applies the overwrite rules to the bundle path: it may not
// exist, be an empty directory, or (with overwrite) be a bundle, which is
// then to be replaced.
func checkDest(path string, overwrite bool) (replace bool, err error) {
	switch st, err := os.Lstat(path); {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, storageErr(err, "%s: %v", path, err)
	case !st.IsDir():
		return false, storageErr(nil, "%s exists and is not a directory", path)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return false, storageErr(err, "%s: %v", path, err)
	}
	if len(entries) > 0 {
		if !overwrite {
			return false, storageErr(fs.ErrExist, "%s already exists and is not empty; pass trace.Overwrite() to replace it", path)
		}
		for _, name := range coreFiles {
			if st, err := os.Stat(filepath.Join(path, name)); err != nil || !st.Mode().IsRegular() {
				return false, storageErr(nil, "%s is not a valid .sftrace bundle; refusing to overwrite it", path)
			}
		}
	}
	return true, nil
}

func hexUUID() string {
	u := uuid.New()
	return strings.ReplaceAll(u.String(), "-", "")
}

// RunTrace returns tr itself. It lets a *Trace stand wherever a run is
// expected (assertions accept anything with a RunTrace method: traces, replay
// results, fork variants).
func (tr *Trace) RunTrace() *Trace { return tr }
