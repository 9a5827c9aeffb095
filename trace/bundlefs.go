package trace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Every file of a bundle is read through bundleSource.open and the checks of
// openBundleFile: a regular file (never a FIFO, a device or a directory), for
// a bundle on disk inside the bundle directory (a symbolic link may not lead
// out of it), and, for the files read whole, within a size limit checked
// before a byte is read. events.jsonl has no size limit: it is streamed, and
// each of its lines is limited to MaxLineBytes.
//
// A bundle stored elsewhere than in a directory (a packed bundle, say)
// implements bundleSource; everything that reads a bundle then works on it
// unchanged.

// Size limits of the files of a bundle that are read whole. A bundle written
// by Save or by Python stepfork stays far below them; a file above its limit
// is refused before it is read.
const (
	maxManifestBytes   = 1 << 20  // manifest.json
	maxIntegrityBytes  = 1 << 20  // integrity.json
	maxRedactionsBytes = 16 << 20 // redactions.json (about 100,000 entries)
	maxExtraBytes      = 16 << 20 // fork.json and any other extra file
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

// bundleSource is where the files of one bundle come from. It is the only
// way trace opens a bundle file.
type bundleSource interface {
	// open opens the named file of the bundle (a plain name such as
	// "manifest.json") for reading. It must not block (on a FIFO, say) and
	// must refuse what does not belong to the bundle; openBundleFile checks
	// the rest on the opened file.
	open(name string) (fs.File, error)
	// where names the file in messages: its path on disk, say.
	where(name string) string
}

// dirSource is a bundle stored as a directory on disk.
type dirSource string

func (d dirSource) where(name string) string { return filepath.Join(string(d), name) }

// open opens a file of the bundle directory without following a symbolic
// link out of the bundle, and without blocking on a FIFO or a device (it is
// opened non-blocking and refused by openBundleFile).
func (d dirSource) open(name string) (fs.File, error) {
	p := d.where(name)
	lst, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	target := p
	if lst.Mode()&fs.ModeSymlink != 0 {
		resolved, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, &fileKindError{p, "a broken symbolic link", p + ": broken symbolic link"}
		}
		root, err := filepath.EvalSymlinks(string(d))
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(root, resolved)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, &fileKindError{p, fmt.Sprintf("a symbolic link that points outside the bundle (%s); copy the file into the bundle instead", resolved), ""}
		}
		target = resolved
	}
	f, err := os.OpenFile(target, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	// What was opened must be what was checked: a symbolic link swapped in
	// between the check and the open is refused.
	st, err1 := f.Stat()
	lt, err2 := os.Lstat(target)
	if err := errors.Join(err1, err2); err != nil {
		f.Close()
		return nil, err
	}
	if !os.SameFile(st, lt) {
		f.Close()
		return nil, &fileKindError{p, "a file that changed while it was opened", ""}
	}
	return f, nil
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

// openBundleFile opens the named file of a bundle through src and checks it:
// a regular file, no larger than limit bytes (0: no limit). The error is a
// storage error naming the file; it matches fs.ErrNotExist for a missing
// file and errFileTooLarge for one above its limit.
func openBundleFile(src bundleSource, name string, limit int64) (fs.File, error) {
	p := src.where(name)
	f, err := src.open(name)
	if err != nil {
		var ke *fileKindError
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, storageErr(err, "missing required file: %s", p)
		case errors.As(err, &ke):
			return nil, storageErr(err, "%s", ke.Error())
		}
		return nil, storageErr(err, "%s: %v", p, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, storageErr(err, "%s: %v", p, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		if st.IsDir() {
			return nil, storageErr(&fileKindError{p, "a directory", ""}, "required path is not a file: %s", p) // stepfork's text
		}
		return nil, storageErr(&fileKindError{p, describeMode(st.Mode()), ""}, "required path is not a file (%s): %s", describeMode(st.Mode()), p)
	}
	if limit > 0 && st.Size() > limit {
		f.Close()
		return nil, storageErr(errFileTooLarge, "%s is %d bytes, more than the limit of %d bytes for %s", p, st.Size(), limit, name)
	}
	return f, nil
}

// readBundleFileFrom reads a whole file of a bundle through the checks of
// openBundleFile, within the file's size limit (even if it grows while it is
// read).
func readBundleFileFrom(src bundleSource, name string) ([]byte, error) {
	limit := fileLimit(name)
	f, err := openBundleFile(src, name, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if limit > 0 {
		r = io.LimitReader(f, limit+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, storageErr(err, "%s: %v", src.where(name), err)
	}
	if limit > 0 && int64(len(data)) > limit {
		return nil, storageErr(errFileTooLarge, "%s is more than the limit of %d bytes for %s", src.where(name), limit, name)
	}
	return data, nil
}

// readBundleFile reads a whole file of the bundle at dir (a directory or a
// packed bundle).
func readBundleFile(dir, name string) ([]byte, error) {
	return readBundleFileFrom(sourceOf(dir), name)
}

// checkRegularFile checks that name inside the bundle dir is a regular file
// that may be read, as openBundleFile does, without reading it.
func checkRegularFile(dir, name string) error {
	f, err := openBundleFile(sourceOf(dir), name, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// extrasListing reads integrity.json to learn which extra files the bundle
// dir has. A record that is malformed lists none: that is for
// VerifyIntegrity to report. An integrity.json that cannot be read at all
// (not a regular file of the bundle, or above its size limit) is an error:
// extra files such as a fork's provenance are not dropped in silence.
func extrasListing(dir string) (*integrityRecord, error) {
	rec, err := readIntegrityRecord(dir)
	var ie *errIntegrityRecord
	if errors.As(err, &ie) && ie.cause != nil {
		return nil, ie.cause
	}
	if err != nil {
		return nil, nil
	}
	return rec, nil
}

// Extra returns the bytes of the extra bundle file called name (fork.json,
// say) when integrity.json lists it, as Load fills Trace.Extras, or nil
// when it does not or when integrity.json is malformed (that is for
// VerifyIntegrity to report); an integrity.json that is not a regular file
// of the bundle, or too large, is an error, as in Load. The file is read through the same
// checks as every other file of the bundle: a regular file inside the
// bundle, no larger than 16 MiB.
func (r *Reader) Extra(name string) ([]byte, error) {
	if !validExtraName(name) || slices.Contains(coreFiles, name) {
		return nil, storageErr(nil, "%s: %q is not the name of an extra bundle file", r.path, name)
	}
	rec, err := extrasListing(r.path)
	if err != nil || rec == nil {
		return nil, err
	}
	if _, ok := rec.digest(name); !ok {
		return nil, nil
	}
	return readBundleFile(r.path, name)
}
