package trace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// PackedSuffix ends the name of a packed bundle: one gzip-compressed tar file
// holding the files of a bundle, NAME.sftrace.tar.gz, for corpora of many
// runs that should not bloat a repository. [Load], [Open], [VerifyIntegrity],
// [ValidateBundle] and every command of stepfork read a packed bundle as they
// read the directory it was packed from; integrity.json, inside it, covers
// its files as it covers a directory's. Directory bundles stay the default
// and the form Python stepfork reads; [Pack] and [Unpack] convert.
//
// The archive holds one directory, NAME.sftrace, and in it the bundle's
// files, each a regular file: manifest.json, redactions.json,
// integrity.json, any extra file (fork.json), and events.jsonl last, so that
// opening a packed bundle reads its small files without decompressing its
// events. Pack writes it reproducibly (no times, owners or modes of the
// machine that packed it): the same bundle packs to the same bytes.
//
// Every reader of a packed bundle reads the archive once, from its start,
// and refuses (with an error matching [ErrCorruptPacked]) an archive that
// does not hold exactly one bundle: an entry that is not a regular file (a
// link, a device, a FIFO, a sparse file) or the one top directory, a path
// that is absolute, climbs out with "..", or is not a file of that
// directory, a file twice, a file after events.jsonl, an extra file that
// integrity.json does not list, more than 64 entries, more than 1 GiB of
// files, or files more than 100 times the size of the archive (a
// decompression bomb; a bundle packs 5 to 10 times smaller). These limits
// are checked on the sizes the archive declares, before its files are
// decompressed.
const PackedSuffix = ".sftrace.tar.gz"

// Budgets of a packed bundle: its entries, the total size of its files
// uncompressed, and the ratio of that to the size of the archive (checked
// from packedRatioFloor up).
const (
	maxPackedMembers = 64
	maxPackedBytes   = 1 << 30
	maxPackedRatio   = 100
	packedRatioFloor = 16 << 20
	// maxPackedTrailer is how much the gzip stream may hold after the end
	// of the tar archive (tar pads archives to a record of 10 KiB).
	maxPackedTrailer = 64 << 10
)

// isPacked reports whether path is a packed bundle: a regular file (or a
// link to one) whose name ends with PackedSuffix.
func isPacked(path string) bool {
	if !strings.HasSuffix(path, PackedSuffix) {
		return false
	}
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// ErrCorruptPacked is matched by the error of a packed bundle that cannot be
// read as one: not gzip, a broken tar, an entry that is not a bundle file,
// an archive above the budgets of a packed bundle.
var ErrCorruptPacked = errors.New("corrupt packed bundle")

// packedReader reads the archive of a packed bundle once, from its start:
// see PackedSuffix for the rules it applies to every entry.
type packedReader struct {
	path       string
	f          *os.File
	gz         *gzip.Reader
	tr         *tar.Reader
	compressed int64 // the size of the packed file
	declared   int64 // the sizes of the entries read so far, in all
	entries    int
	top        string
	order      []string // the files, in archive order
	finished   bool     // the end of the archive was checked
	endErr     error    // and what was wrong with it
}

func (p *packedReader) corrupt(format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", p.path, ErrCorruptPacked, fmt.Sprintf(format, args...))
}

func (p *packedReader) Close() error {
	if p.gz != nil {
		p.gz.Close()
	}
	return p.f.Close()
}

// openPacked opens the packed bundle at path: it reads the archive up to
// events.jsonl, keeping the bundle's small files in memory, and leaves it
// there for events.jsonl to be streamed.
func openPacked(path string) (*bundle, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, storageErr(err, "%s: %v", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, storageErr(err, "%s: %v", path, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, storageErr(&fileKindError{path, describeMode(st.Mode()), ""}, "required path is not a file (%s): %s", describeMode(st.Mode()), path)
	}
	p := &packedReader{path: path, f: f, compressed: st.Size()}
	b := &bundle{path: path, packed: true, files: map[string]*bundleMember{}, pr: p}
	fail := func(err error) (*bundle, error) {
		b.Close()
		return nil, storageErr(err, "%s", err.Error())
	}
	if p.gz, err = gzip.NewReader(f); err != nil {
		return fail(p.corrupt("not gzip-compressed (%v); pack a bundle with stepfork pack", err))
	}
	p.tr = tar.NewReader(p.gz)
	for {
		name, size, err := p.next()
		if err == io.EOF {
			p.finished = true
			break
		}
		if err != nil {
			return fail(err)
		}
		if name == "" {
			continue // the top directory
		}
		if name == EventsFile {
			b.files[name] = &bundleMember{size: size}
			break
		}
		if err := checkMember(b.where(name), name, 0, size); err != nil {
			b.files[name] = &bundleMember{size: size, err: err} // its bytes are skipped
			continue
		}
		data := make([]byte, size)
		if _, err := io.ReadFull(p.tr, data); err != nil {
			return fail(p.corrupt("%s: %v", name, err))
		}
		b.files[name] = &bundleMember{data: data, size: size}
	}
	// Every extra file must be listed: integrity.json says which files
	// the bundle has.
	rec, _ := b.extrasListing()
	var listed []string
	if rec != nil {
		listed = rec.extras()
	}
	for _, name := range p.order {
		if !slices.Contains(coreFiles, name) && name != IntegrityFile && !slices.Contains(listed, name) {
			return fail(p.corrupt("entry %q is not a file integrity.json lists; a packed bundle holds its bundle's files only", name))
		}
	}
	b.checkExtras(listed)
	return b, nil
}

// checkExtras applies the budget of extra files to those of the list:
// above it, integrity.json cannot be used, and every reader refuses the
// bundle as it refuses an integrity.json above its size limit.
func (b *bundle) checkExtras(listed []string) {
	err := checkExtrasBudget(b.where(IntegrityFile), listed, func(name string) int64 {
		if m := b.files[name]; m != nil && m.err == nil {
			return m.size
		}
		return -1
	})
	if err != nil {
		b.listing, b.listingErr = nil, &errIntegrityRecord{IntegrityIssue{CodeIntegrityMetadataInvalid, extrasBudgetMessage(err), IntegrityFile}, err}
	}
}

// next reads the header of the next entry of the archive, checks it, and
// returns the bundle file it holds ("" for the top directory) and its size.
func (p *packedReader) next() (string, int64, error) {
	hdr, err := p.tr.Next()
	if err == io.EOF {
		return "", 0, io.EOF
	}
	if err != nil {
		return "", 0, p.corrupt("%v", err)
	}
	if p.entries++; p.entries > maxPackedMembers {
		return "", 0, p.corrupt("more than %d entries", maxPackedMembers)
	}
	if hdr.Size < 0 {
		return "", 0, p.corrupt("entry %q has a negative size", hdr.Name)
	}
	p.declared += hdr.Size
	switch {
	case p.declared > maxPackedBytes:
		return "", 0, p.corrupt("its files are more than %d bytes uncompressed, the limit of a packed bundle", maxPackedBytes)
	case p.declared > packedRatioFloor && p.declared/maxPackedRatio > p.compressed:
		return "", 0, p.corrupt("its files are %d bytes uncompressed, more than %d times the %d bytes of the archive: a bundle compresses far less; refused as a decompression bomb", p.declared, maxPackedRatio, p.compressed)
	}
	name, isDir, err := p.member(hdr)
	if err != nil {
		return "", 0, err
	}
	if isDir {
		if p.entries > 1 {
			return "", 0, p.corrupt("entry %q: the directory of the bundle comes first", hdr.Name)
		}
		return "", 0, nil
	}
	if name != EventsFile && name != IntegrityFile && !slices.Contains(coreFiles, name) && !validExtraName(name) {
		return "", 0, p.corrupt("entry %q is not the name of a bundle file", hdr.Name)
	}
	if slices.Contains(p.order, name) {
		return "", 0, p.corrupt("entry %q appears twice", hdr.Name)
	}
	p.order = append(p.order, name)
	return name, hdr.Size, nil
}

// member checks the name and type of one entry of the archive and returns
// the bundle file it holds (or isDir for the top directory itself).
func (p *packedReader) member(hdr *tar.Header) (name string, isDir bool, err error) {
	clean := strings.TrimSuffix(hdr.Name, "/")
	if clean == "" || path.IsAbs(clean) || path.Clean(clean) != clean || strings.Contains(clean, "\\") || slices.Contains(strings.Split(clean, "/"), "..") {
		return "", false, p.corrupt("entry %q is not a path inside the bundle", hdr.Name)
	}
	dir, file := path.Split(clean)
	dir = strings.TrimSuffix(dir, "/")
	switch hdr.Typeflag {
	case tar.TypeDir:
		if dir != "" {
			return "", false, p.corrupt("entry %q: a bundle has no nested directories", hdr.Name)
		}
		dir = file
		file = ""
	case tar.TypeReg:
		if dir == "" || strings.Contains(dir, "/") {
			return "", false, p.corrupt("entry %q is not a file of the bundle directory", hdr.Name)
		}
	default:
		return "", false, p.corrupt("entry %q is not a regular file (tar type %q); a packed bundle holds only its files", hdr.Name, hdr.Typeflag)
	}
	if !strings.HasSuffix(dir, ".sftrace") {
		return "", false, p.corrupt("entry %q is not inside a NAME.sftrace directory", hdr.Name)
	}
	if p.top == "" {
		p.top = dir
	} else if dir != p.top {
		return "", false, p.corrupt("entries of two bundles (%s and %s); pack one bundle per file", p.top, dir)
	}
	return file, file == "", nil
}

// events returns events.jsonl, the member the archive is positioned at.
func (p *packedReader) events() io.Reader { return packedEvents{p} }

// packedEvents reads events.jsonl from the archive. At its end it checks
// the end of the archive: no entry after it, a sound gzip stream (its
// checksum), nothing but padding after the archive.
type packedEvents struct{ p *packedReader }

func (e packedEvents) Read(b []byte) (int, error) {
	p := e.p
	if p.finished {
		if p.endErr != nil {
			return 0, p.endErr
		}
		return 0, io.EOF
	}
	n, err := p.tr.Read(b)
	if err == io.EOF {
		p.finished = true
		p.endErr = p.end()
		if p.endErr != nil {
			return n, p.endErr
		}
		return n, io.EOF
	}
	if err != nil {
		return n, p.corrupt("%s: %v", EventsFile, err)
	}
	return n, nil
}

// finish reads the rest of events.jsonl, when it was not read to its end,
// and checks the end of the archive, once: an archive read partly (a fork
// of its first steps) is refused as one read whole is.
func (p *packedReader) finish() error {
	if !p.finished {
		if _, err := io.Copy(io.Discard, packedEvents{p}); err != nil && p.endErr == nil {
			p.finished, p.endErr = true, err
		}
	}
	return p.endErr
}

// end checks what follows events.jsonl.
func (p *packedReader) end() error {
	hdr, err := p.tr.Next()
	switch {
	case err == nil:
		return p.corrupt("entry %q follows events.jsonl, the last file of a packed bundle", hdr.Name)
	case err != io.EOF:
		return p.corrupt("after %s: %v", EventsFile, err)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(p.gz, maxPackedTrailer+1))
	switch {
	case err != nil:
		return p.corrupt("after %s: %v", EventsFile, err)
	case n > maxPackedTrailer:
		return p.corrupt("more than %d bytes follow the end of the archive", maxPackedTrailer)
	}
	return nil
}

// Pack writes the bundle directory src as the packed bundle dst (which must
// end with [PackedSuffix]), atomically: dst appears complete or not at all.
// It refuses to replace an existing dst unless opts include [Overwrite].
// Every file of src is read through the same checks as Load's (regular files
// inside the bundle, size limits) and must be listed by integrity.json when
// src has one, so that the packed bundle verifies as src does; a bundle
// above the budget of a packed bundle (1 GiB of files) is refused. The
// temporary files that packs of dst killed before they finished left
// beside it are removed first.
func Pack(src, dst string, opts ...SaveOption) error {
	var cfg saveConfig
	for _, o := range opts {
		o(&cfg)
	}
	if isPacked(src) {
		return storageErr(nil, "%s is packed already", src)
	}
	if !strings.HasSuffix(dst, PackedSuffix) {
		return storageErr(nil, "a packed bundle's name must end with %s: %s", PackedSuffix, dst)
	}
	b, err := openBundle(src)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := recoverLeftovers(dst); err != nil {
		return err
	}
	if _, err := os.Lstat(dst); err == nil && !cfg.overwrite {
		return storageErr(fs.ErrExist, "%s already exists; pass Overwrite to replace it", dst)
	}
	names, err := bundleFiles(b)
	if err != nil {
		return err
	}
	var total int64
	for _, n := range names {
		if m := b.files[n]; m != nil && m.err == nil {
			total += m.size
		}
	}
	if total > maxPackedBytes {
		return storageErr(nil, "%s: its files are %d bytes, more than the %d bytes a packed bundle may hold; keep it as a directory", src, total, maxPackedBytes)
	}
	top := strings.TrimSuffix(filepath.Base(dst), ".tar.gz")
	dir := parentDir(dst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+tmpInfix+"*")
	if err != nil {
		return storageErr(err, "%s: %v", dst, err)
	}
	// Locked while it is written, so that another pack of dst does not take
	// it for the leftover of a dead one.
	lock, err := lockDir(tmp.Name())
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return storageErr(err, "%s: locking %s: %v", dst, tmp.Name(), err)
	}
	defer lock.release()
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	gz, _ := gzip.NewWriterLevel(tmp, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: top + "/", Mode: 0o755, Format: tar.FormatPAX}); err != nil {
		return fail(storageErr(err, "%s: %v", dst, err))
	}
	for _, name := range names {
		if err := packFile(tw, b, top, name); err != nil {
			return fail(err)
		}
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		return fail(storageErr(err, "%s: %v", dst, err))
	}
	if err := tmp.Sync(); err != nil {
		return fail(storageErr(err, "%s: %v", dst, err))
	}
	if err := tmp.Close(); err != nil {
		return fail(storageErr(err, "%s: %v", dst, err))
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		os.Remove(tmp.Name())
		return storageErr(err, "%s: %v", dst, err)
	}
	if err := syncDir(dir); err != nil {
		return storageErr(err, "%s: syncing %s: %v", dst, dir, err)
	}
	return nil
}

// bundleFiles lists the files of the bundle directory b in packing order:
// the three small core files, the extras integrity.json lists (sorted), and
// events.jsonl last. Files of the directory that are not part of the bundle
// (not a core file, not listed) are not packed.
func bundleFiles(b *bundle) ([]string, error) {
	names := []string{ManifestFile, RedactionsFile}
	if m := b.files[IntegrityFile]; m != nil && !errors.Is(m.err, fs.ErrNotExist) {
		names = append(names, IntegrityFile)
		rec, err := b.extrasListing()
		if err != nil {
			return nil, err
		}
		if rec != nil {
			extras := rec.extras()
			slices.Sort(extras)
			names = append(names, extras...)
		}
	}
	return append(names, EventsFile), nil
}

func packFile(tw *tar.Writer, b *bundle, top, name string) error {
	var r io.Reader
	var size int64
	if name == EventsFile {
		m, err := b.file(name)
		if err != nil {
			return err
		}
		if r, err = b.events(); err != nil {
			return err
		}
		size = m.size
	} else {
		data, err := b.read(name)
		if err != nil {
			return err
		}
		r, size = bytes.NewReader(data), int64(len(data))
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: top + "/" + name, Mode: 0o644, Size: size, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return storageErr(err, "%s: %v", b.where(name), err)
	}
	if n, err := io.Copy(tw, io.LimitReader(r, size)); err != nil || n != size {
		if err == nil {
			err = fmt.Errorf("%s changed while it was packed", b.where(name))
		}
		return storageErr(err, "%s: %v", b.where(name), err)
	}
	return nil
}

// Unpack writes the packed bundle src as the bundle directory dst, file for
// file and byte for byte, atomically as Save writes a bundle. It refuses to
// replace an existing dst unless opts include [Overwrite]. A corrupt archive
// is an error matching [ErrCorruptPacked]; nothing is written.
func Unpack(src, dst string, opts ...SaveOption) error {
	var cfg saveConfig
	for _, o := range opts {
		o(&cfg)
	}
	if !isPacked(src) {
		return storageErr(nil, "%s is not a packed bundle (a file whose name ends with %s)", src, PackedSuffix)
	}
	if err := checkSuffix(dst); err != nil {
		return err
	}
	dst = filepath.Clean(dst)
	if err := recoverLeftovers(dst); err != nil {
		return err
	}
	if _, err := checkDest(dst, cfg.overwrite); err != nil {
		return err
	}
	b, err := openBundle(src)
	if err != nil {
		return err
	}
	defer b.Close()
	for _, name := range b.pr.order {
		if _, err := b.file(name); err != nil {
			return err
		}
	}
	tmp, lock, err := makeTemp(dst)
	if err != nil {
		return err
	}
	defer lock.release()
	for _, name := range b.pr.order {
		if err := unpackFile(b, name, filepath.Join(tmp, name)); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	return commitBundle(dst, tmp, cfg.overwrite)
}

func unpackFile(b *bundle, name, to string) error {
	var in io.Reader
	if name == EventsFile {
		var err error
		if in, err = b.events(); err != nil {
			return err
		}
	} else {
		data, err := b.read(name)
		if err != nil {
			return err
		}
		in = bytes.NewReader(data)
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return storageErr(err, "%s: %v", to, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return storageErr(err, "%s", err.Error())
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return storageErr(err, "%s: %v", to, err)
	}
	return out.Close()
}
