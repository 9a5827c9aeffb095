package trace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Every read of a bundle goes through one bundle, opened once by
// openBundle, whatever reads it (Open, Load, ValidateBundle,
// VerifyIntegrity, ReadBehavior, Pack, Unpack):
//
//   - A bundle directory is opened once (os.Root) and every file is opened
//     relative to it when the bundle is opened, so that a reader sees one
//     bundle, never files of two: a Save that replaces the bundle swaps
//     directories, and the files opened stay those of the directory that
//     was opened. A symbolic link may not lead out of the directory.
//   - A packed bundle is read once from its start: its small files into
//     memory, under the member rules of packedReader, until events.jsonl,
//     which is then streamed; whatever follows it in the archive is refused
//     when its end is reached.
//
// Each file must be a regular file (never a FIFO, a device or a directory)
// and the files read whole are within a size limit checked before a byte is
// read. events.jsonl has no size limit: it is streamed, and each of its
// lines is limited to MaxLineBytes. The extra files integrity.json lists
// are at most maxExtraFiles, of maxExtrasBytes in all.

// Size limits of the files of a bundle that are read whole. A bundle written
// by Save or by Python stepfork stays far below them; a file above its limit
// is refused before it is read.
const (
	maxManifestBytes   = 1 << 20  // manifest.json
	maxIntegrityBytes  = 1 << 20  // integrity.json
	maxRedactionsBytes = 16 << 20 // redactions.json (about 100,000 entries)
	maxExtraBytes      = 16 << 20 // fork.json and any other extra file
)

// The budget of the extra files of one bundle (fork.json, lanes.json): how
// many integrity.json may list and their total size. A bundle lists one or
// two.
const (
	maxExtraFiles  = 32
	maxExtrasBytes = 32 << 20
)

// fileLimit returns the size limit of the named bundle file, or 0 for no
// limit (events.jsonl).
func fileLimit(name string) int64 {
	switch name {
	case EventsFile:
		return 0
	case ManifestFile:
		return maxManifestBytes
	case IntegrityFile:
		return maxIntegrityBytes
	case RedactionsFile:
		return maxRedactionsBytes
	}
	return maxExtraBytes
}

// bundle is one bundle opened for reading: every file it has, opened (a
// directory's) or read (a packed bundle's small files) when it was opened,
// and events.jsonl, to be read once.
type bundle struct {
	path   string
	packed bool
	files  map[string]*bundleMember
	root   *os.Root      // a bundle directory
	pr     *packedReader // a packed bundle
	// listing is integrity.json parsed, or why it cannot be; listed is true
	// once it was.
	listing    *integrityRecord
	listingErr error
	listed     bool
	eventsUsed bool
}

// bundleMember is one file of an opened bundle.
type bundleMember struct {
	f    *os.File // a file of a bundle directory
	data []byte   // a small file of a packed bundle, or one read
	size int64
	err  error // why it cannot be read: a storage error
}

// where names a file of the bundle in messages: its path on disk, or for a
// packed bundle its path inside the packed file
// (runs/a.sftrace.tar.gz/events.jsonl).
func (b *bundle) where(name string) string {
	if b.packed {
		return b.path + "/" + name
	}
	return filepath.Join(b.path, name)
}

// Close closes every file of the bundle.
func (b *bundle) Close() error {
	if b == nil {
		return nil
	}
	var errs []error
	for _, m := range b.files {
		if m.f != nil {
			errs = append(errs, m.f.Close())
			m.f = nil
		}
	}
	if b.root != nil {
		errs = append(errs, b.root.Close())
		b.root = nil
	}
	if b.pr != nil {
		errs = append(errs, b.pr.Close())
		b.pr = nil
	}
	return errors.Join(errs...)
}

// openBundle opens the bundle at path, a directory or a packed bundle,
// for reading: see the top of this file.
func openBundle(path string) (*bundle, error) {
	if isPacked(path) {
		return openPacked(path)
	}
	if err := checkSuffix(path); err != nil {
		return nil, err
	}
	// A save that replaces the bundle while it is opened swaps the
	// directories and removes the old one: a file that vanished from the
	// directory opened means it was, and the bundle is opened again.
	for attempt := 0; ; attempt++ {
		b, err := openDir(path)
		if err != nil || attempt == 4 || !b.replaced() {
			return b, err
		}
		b.Close()
	}
}

// openDir opens the bundle directory at path and every file of it.
func openDir(path string) (*bundle, error) {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, storageErr(err, "missing required file: %s", path)
		}
		return nil, storageErr(err, "%s: %v", path, err)
	}
	if !st.IsDir() {
		return nil, storageErr(nil, "%s is not a directory", path)
	}
	root, err := os.OpenRoot(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, storageErr(err, "missing required file: %s", path)
		}
		return nil, storageErr(err, "%s: %v", path, err)
	}
	b := &bundle{path: path, root: root, files: map[string]*bundleMember{}}
	for _, name := range []string{ManifestFile, RedactionsFile, IntegrityFile, EventsFile} {
		b.files[name] = b.openMember(name)
	}
	rec, err := b.integrity()
	if err != nil || rec == nil {
		return b, nil
	}
	extras := rec.extras() // at most maxExtraFiles: integrity checked it
	for _, name := range extras {
		b.files[name] = b.openMember(name)
	}
	b.checkExtras(extras)
	return b, nil
}

// replaced reports whether a file of the bundle directory vanished because
// the directory is no longer the one at the bundle's path.
func (b *bundle) replaced() bool {
	vanished := false
	for _, m := range b.files {
		vanished = vanished || errors.Is(m.err, fs.ErrNotExist)
	}
	if !vanished {
		return false
	}
	here, err1 := b.root.Stat(".")
	now, err2 := os.Stat(b.path)
	return err1 != nil || err2 != nil || !os.SameFile(here, now)
}

// openMember opens a file of the bundle directory and checks it: a regular
// file inside the bundle, within its size limit.
func (b *bundle) openMember(name string) *bundleMember {
	p := b.where(name)
	f, err := b.openFile(name)
	if err != nil {
		var ke *fileKindError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return &bundleMember{err: storageErr(err, "missing required file: %s", p)}
		case errors.As(err, &ke):
			return &bundleMember{err: storageErr(err, "%s", ke.Error())}
		}
		return &bundleMember{err: storageErr(err, "%s: %v", p, err)}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return &bundleMember{err: storageErr(err, "%s: %v", p, err)}
	}
	if err := checkMember(p, name, st.Mode(), st.Size()); err != nil {
		f.Close()
		return &bundleMember{err: err}
	}
	return &bundleMember{f: f, size: st.Size()}
}

// checkMember checks the kind and size of the file of a bundle at p.
func checkMember(p, name string, mode fs.FileMode, size int64) error {
	if !mode.IsRegular() {
		if mode.IsDir() {
			return storageErr(&fileKindError{p, "a directory", ""}, "required path is not a file: %s", p) // stepfork's text
		}
		return storageErr(&fileKindError{p, describeMode(mode), ""}, "required path is not a file (%s): %s", describeMode(mode), p)
	}
	if limit := fileLimit(name); limit > 0 && size > limit {
		return storageErr(errFileTooLarge, "%s is %d bytes, more than the limit of %d bytes for %s", p, size, limit, name)
	}
	return nil
}

// openFile opens a file of the bundle directory without following a
// symbolic link out of it, and without blocking on a FIFO or a device (it
// is opened non-blocking, and refused by checkMember).
func (b *bundle) openFile(name string) (*os.File, error) {
	f, err := b.root.OpenFile(name, os.O_RDONLY|openNonblock, 0)
	if err == nil {
		return f, nil
	}
	lst, lerr := b.root.Lstat(name)
	if lerr != nil || lst.Mode()&fs.ModeSymlink == 0 {
		return nil, err
	}
	// A symbolic link the root did not follow: broken, leading out of the
	// bundle, or absolute (which os.Root does not follow even inside it).
	p := b.where(name)
	resolved, rerr := filepath.EvalSymlinks(p)
	if rerr != nil {
		return nil, &fileKindError{p, "a broken symbolic link", p + ": broken symbolic link"}
	}
	top, terr := filepath.EvalSymlinks(b.path)
	rel, relErr := filepath.Rel(top, resolved)
	if terr != nil || relErr != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return nil, &fileKindError{p, fmt.Sprintf("a symbolic link that points outside the bundle (%s); copy the file into the bundle instead", resolved), ""}
	}
	return b.root.OpenFile(rel, os.O_RDONLY|openNonblock, 0)
}

// fileKindError is a bundle file that is not a regular file of the bundle;
// what says what it is instead ("a named pipe").
type fileKindError struct {
	path string
	what string
	text string // the message, when not "<path> is <what>"
}

func (e *fileKindError) Error() string {
	if e.text != "" {
		return e.text
	}
	return fmt.Sprintf("%s is %s", e.path, e.what)
}

// errFileTooLarge is matched by the error of a bundle file above its size
// limit.
var errFileTooLarge = errors.New("bundle file too large")

// describeMode says what a file that is not a regular file is.
func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// file returns the named file of the bundle, or its storage error; a
// file the bundle was not opened with is missing.
func (b *bundle) file(name string) (*bundleMember, error) {
	m := b.files[name]
	if m == nil {
		return nil, storageErr(&fs.PathError{Op: "open", Path: b.where(name), Err: fs.ErrNotExist}, "missing required file: %s", b.where(name))
	}
	if m.err != nil {
		return nil, m.err
	}
	return m, nil
}

// read returns the whole named file of the bundle (not events.jsonl),
// within its size limit even if it grows while it is read, the same bytes
// each time it is called (the first reading's). The error is a
// storage error naming the file; it matches fs.ErrNotExist for a missing
// file and errFileTooLarge for one above its limit.
func (b *bundle) read(name string) ([]byte, error) {
	m, err := b.file(name)
	if err != nil {
		return nil, err
	}
	if m.f == nil || m.data != nil {
		return m.data, nil // a packed bundle's, or read before
	}
	limit := fileLimit(name)
	if limit == 0 {
		limit = math.MaxInt64 - 1
	}
	data, err := io.ReadAll(io.NewSectionReader(m.f, 0, limit+1))
	if err != nil {
		return nil, storageErr(err, "%s: %v", b.where(name), err)
	}
	if int64(len(data)) > limit {
		return nil, storageErr(errFileTooLarge, "%s is more than the limit of %d bytes for %s", b.where(name), limit, name)
	}
	m.data = data // what is checked later is what was read
	return data, nil
}

// events returns events.jsonl to be read from its start, once: the file of
// a bundle directory (which may be read again at an offset), or the
// archive of a packed bundle positioned at it.
func (b *bundle) events() (io.Reader, error) {
	m, err := b.file(EventsFile)
	if err != nil {
		return nil, err
	}
	if b.eventsUsed {
		return nil, storageErr(nil, "%s: read twice from one opening of the bundle", b.where(EventsFile))
	}
	b.eventsUsed = true
	if m.f != nil {
		return m.f, nil
	}
	return b.pr.events(), nil
}

// digest returns the lowercase hex SHA-256 of the named file's bytes.
// events.jsonl of a packed bundle is read (and so used up) by it.
func (b *bundle) digest(name string) (string, error) {
	h := sha256.New()
	if name == EventsFile {
		r, err := b.events()
		if err != nil {
			return "", err
		}
		if f, ok := r.(*os.File); ok {
			r = io.NewSectionReader(f, 0, math.MaxInt64)
		}
		// A buffer of the file's size when it is small: a test verifies
		// many small bundles, and io.Copy's is 32 KB.
		size := int64(32 << 10)
		if m := b.files[EventsFile]; m.size >= 0 && m.size < size {
			size = max(m.size+1, 512)
		}
		if _, err := io.CopyBuffer(h, r, make([]byte, size)); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	data, err := b.read(name)
	if err != nil {
		return "", err
	}
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// integrity returns integrity.json parsed, as readIntegrityRecord does:
// (nil, nil) when the bundle has none.
func (b *bundle) integrity() (*integrityRecord, error) {
	if !b.listed {
		b.listing, b.listingErr = parseIntegrityRecord(b)
		b.listed = true
	}
	return b.listing, b.listingErr
}

// extrasListing reads integrity.json to learn which extra files the bundle
// has. A record that is malformed lists none: that is for VerifyIntegrity
// to report. An integrity.json that cannot be read at all (not a regular
// file of the bundle, above its size limit, listing more extra files than
// the budget of a bundle) is an error: extra files such as a fork's
// provenance are not dropped in silence.
func (b *bundle) extrasListing() (*integrityRecord, error) {
	rec, err := b.integrity()
	var ie *errIntegrityRecord
	if errors.As(err, &ie) && ie.cause != nil {
		return nil, ie.cause
	}
	if err != nil {
		return nil, nil
	}
	return rec, nil
}

// extras reads the extra files that integrity.json lists, if any.
func (b *bundle) extras() (map[string][]byte, error) {
	rec, err := b.extrasListing()
	if err != nil || rec == nil {
		return nil, err
	}
	var extras map[string][]byte
	for _, name := range rec.extras() {
		data, err := b.read(name)
		if err != nil {
			return nil, err
		}
		if extras == nil {
			extras = map[string][]byte{}
		}
		extras[name] = data
	}
	return extras, nil
}

// extras lists the extra files of the record: the names that may be extra
// files, in its order.
func (r *integrityRecord) extras() []string {
	var out []string
	for _, f := range r.Files {
		if !slices.Contains(coreFiles, f.Name) && validExtraName(f.Name) {
			out = append(out, f.Name)
		}
	}
	return out
}

// checkExtrasBudget refuses a bundle whose extra files are more, or
// larger in all, than the budget of a bundle; size gives the size of each
// (-1 when it is missing or cannot be read).
func checkExtrasBudget(where string, names []string, size func(string) int64) error {
	if len(names) > maxExtraFiles {
		return storageErr(errFileTooLarge, "%s lists %d extra files, more than the limit of %d for a bundle", where, len(names), maxExtraFiles)
	}
	var total int64
	for _, n := range names {
		total += max(0, size(n))
	}
	if total > maxExtrasBytes {
		return storageErr(errFileTooLarge, "the extra files that %s lists are %d bytes in all, more than the limit of %d bytes for a bundle", where, total, maxExtrasBytes)
	}
	return nil
}

// Extra returns the bytes of the extra bundle file called name (fork.json,
// say) when integrity.json lists it, as Load fills Trace.Extras, or nil
// when it does not or when integrity.json is malformed (that is for
// VerifyIntegrity to report); an integrity.json that is not a regular file
// of the bundle, or too large, is an error, as in Load. The file is read
// from the bundle as it was opened, through the same checks as every other
// file of the bundle: a regular file inside the bundle, no larger than
// 16 MiB.
func (r *Reader) Extra(name string) ([]byte, error) {
	if !validExtraName(name) || slices.Contains(coreFiles, name) {
		return nil, storageErr(nil, "%s: %q is not the name of an extra bundle file", r.path, name)
	}
	rec, err := r.b.extrasListing()
	if err != nil || rec == nil {
		return nil, err
	}
	if _, ok := rec.digest(name); !ok {
		return nil, nil
	}
	return r.b.read(name)
}
