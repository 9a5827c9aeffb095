package trace

import (
	"archive/tar"
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
	"time"
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
const PackedSuffix = ".sftrace.tar.gz"

// maxPackedMembers bounds the entries of a packed bundle: a bundle has four
// files and a few extras.
const maxPackedMembers = 64

// isPacked reports whether path is a packed bundle: a regular file (or a
// link to one) whose name ends with PackedSuffix.
func isPacked(path string) bool {
	if !strings.HasSuffix(path, PackedSuffix) {
		return false
	}
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// sourceOf is the bundleSource of the bundle at path: a packed file or a
// directory.
func sourceOf(path string) bundleSource {
	if isPacked(path) {
		return packedSource(path)
	}
	return dirSource(path)
}

// packedSource is a packed bundle on disk.
type packedSource string

// where names a member as a path inside the packed file:
// runs/a.sftrace.tar.gz/events.jsonl.
func (p packedSource) where(name string) string { return string(p) + "/" + name }

// ErrCorruptPacked is matched by the error of a packed bundle that cannot be
// read as one: not gzip, a broken tar, an entry that is not a bundle file.
var ErrCorruptPacked = errors.New("corrupt packed bundle")

func (p packedSource) corrupt(format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", string(p), ErrCorruptPacked, fmt.Sprintf(format, args...))
}

// open finds the member called name by reading the archive from its start.
// The packed file itself is opened without blocking and must be a regular
// file; every entry before the one asked for is checked (a plain bundle file
// name inside the one top directory, a regular file, at most
// maxPackedMembers entries) so that a hostile archive is refused, not
// followed.
func (p packedSource) open(name string) (fs.File, error) {
	f, err := os.OpenFile(string(p), os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &fileKindError{string(p), describeMode(st.Mode()), ""}
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, p.corrupt("not gzip-compressed (%v); pack a bundle with stepfork pack", err)
	}
	tr := tar.NewReader(gz)
	top := ""
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			gz.Close()
			f.Close()
			return nil, &fs.PathError{Op: "open", Path: p.where(name), Err: fs.ErrNotExist}
		}
		if err != nil {
			gz.Close()
			f.Close()
			return nil, p.corrupt("%v", err)
		}
		if n >= maxPackedMembers {
			gz.Close()
			f.Close()
			return nil, p.corrupt("more than %d entries", maxPackedMembers)
		}
		member, isDir, err := p.member(hdr, &top)
		if err != nil {
			gz.Close()
			f.Close()
			return nil, err
		}
		if isDir || member != name {
			continue
		}
		return &packedFile{src: p, name: name, size: hdr.Size, tr: tr, gz: gz, f: f}, nil
	}
}

// member checks one entry of the archive and returns the bundle file it
// holds (or isDir for the top directory itself).
func (p packedSource) member(hdr *tar.Header, top *string) (name string, isDir bool, err error) {
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
	if *top == "" {
		*top = dir
	} else if dir != *top {
		return "", false, p.corrupt("entries of two bundles (%s and %s); pack one bundle per file", *top, dir)
	}
	return file, file == "", nil
}

// packedFile is one member of a packed bundle, read as the archive is
// decompressed. At the end of the member it reads the archive to its end, so
// that a gzip checksum or a truncation after the member is reported rather
// than missed.
type packedFile struct {
	src  packedSource
	name string
	size int64
	tr   *tar.Reader
	gz   *gzip.Reader
	f    *os.File
	done bool
}

func (pf *packedFile) Read(b []byte) (int, error) {
	n, err := pf.tr.Read(b)
	if err == io.EOF && !pf.done {
		pf.done = true
		if derr := pf.drain(); derr != nil {
			return n, derr
		}
	} else if err != nil && err != io.EOF {
		return n, pf.src.corrupt("%s: %v", pf.name, err)
	}
	return n, err
}

// drain checks the rest of the archive.
func (pf *packedFile) drain() error {
	for {
		_, err := pf.tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return pf.src.corrupt("after %s: %v", pf.name, err)
		}
	}
	if _, err := io.Copy(io.Discard, pf.gz); err != nil {
		return pf.src.corrupt("after %s: %v", pf.name, err)
	}
	return nil
}

func (pf *packedFile) Close() error {
	pf.gz.Close()
	return pf.f.Close()
}

func (pf *packedFile) Stat() (fs.FileInfo, error) { return packedInfo{pf.name, pf.size}, nil }

type packedInfo struct {
	name string
	size int64
}

func (i packedInfo) Name() string       { return i.name }
func (i packedInfo) Size() int64        { return i.size }
func (i packedInfo) Mode() fs.FileMode  { return 0o644 }
func (i packedInfo) ModTime() time.Time { return time.Time{} }
func (i packedInfo) IsDir() bool        { return false }
func (i packedInfo) Sys() any           { return nil }

// members lists the files of a packed bundle in archive order.
func (p packedSource) members() ([]string, error) {
	f, err := p.open("\x00") // no member has this name: reads the whole archive
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	// Read again for the names (open checked every entry).
	fh, err := os.Open(string(p))
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	gz, err := gzip.NewReader(fh)
	if err != nil {
		return nil, p.corrupt("%v", err)
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	var out []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, p.corrupt("%v", err)
		}
		if hdr.Typeflag == tar.TypeReg {
			out = append(out, path.Base(hdr.Name))
		}
	}
}

// Pack writes the bundle directory src as the packed bundle dst (which must
// end with [PackedSuffix]), atomically: dst appears complete or not at all.
// It refuses to replace an existing dst unless opts include [Overwrite].
// Every file of src is read through the same checks as Load's (regular files
// inside the bundle, size limits) and must be listed by integrity.json when
// src has one, so that the packed bundle verifies as src does.
func Pack(src, dst string, opts ...SaveOption) error {
	var cfg saveConfig
	for _, o := range opts {
		o(&cfg)
	}
	if err := checkBundleDir(src); err != nil {
		return err
	}
	if isPacked(src) {
		return storageErr(nil, "%s is packed already", src)
	}
	if !strings.HasSuffix(dst, PackedSuffix) {
		return storageErr(nil, "a packed bundle's name must end with %s: %s", PackedSuffix, dst)
	}
	if _, err := os.Lstat(dst); err == nil && !cfg.overwrite {
		return storageErr(fs.ErrExist, "%s already exists; pass Overwrite to replace it", dst)
	}
	names, err := bundleFiles(src)
	if err != nil {
		return err
	}
	top := strings.TrimSuffix(filepath.Base(dst), ".tar.gz")
	dir := filepath.Dir(dst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return storageErr(err, "%s: %v", dst, err)
	}
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
		if err := packFile(tw, dirSource(src), top, name); err != nil {
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

// bundleFiles lists the files of the bundle directory src in packing order:
// the three small core files, the extras integrity.json lists (sorted), and
// events.jsonl last. Files of the directory that are not part of the bundle
// (not a core file, not listed) are not packed.
func bundleFiles(src string) ([]string, error) {
	names := []string{ManifestFile, RedactionsFile}
	if _, err := os.Lstat(filepath.Join(src, IntegrityFile)); err == nil {
		names = append(names, IntegrityFile)
		rec, err := extrasListing(src)
		if err != nil {
			return nil, err
		}
		if rec != nil {
			var extras []string
			for _, f := range rec.Files {
				if !slices.Contains(coreFiles, f.Name) && validExtraName(f.Name) {
					extras = append(extras, f.Name)
				}
			}
			slices.Sort(extras)
			names = append(names, extras...)
		}
	}
	return append(names, EventsFile), nil
}

func packFile(tw *tar.Writer, src bundleSource, top, name string) error {
	f, err := openBundleFile(src, name, fileLimit(name))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return storageErr(err, "%s: %v", src.where(name), err)
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: top + "/" + name, Mode: 0o644, Size: st.Size(), Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return storageErr(err, "%s: %v", src.where(name), err)
	}
	if n, err := io.Copy(tw, f); err != nil || n != st.Size() {
		if err == nil {
			err = fmt.Errorf("%s changed while it was packed", src.where(name))
		}
		return storageErr(err, "%s: %v", src.where(name), err)
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
	p := packedSource(src)
	names, err := p.members()
	if err != nil {
		return err
	}
	tmp, lock, err := makeTemp(dst)
	if err != nil {
		return err
	}
	defer lock.release()
	for _, name := range names {
		if err := unpackFile(p, name, filepath.Join(tmp, name)); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	return commitBundle(dst, tmp, cfg.overwrite)
}

func unpackFile(p packedSource, name, to string) error {
	in, err := openBundleFile(p, name, fileLimit(name))
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return storageErr(err, "%s: %v", to, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return storageErr(err, "%s: %v", to, err)
	}
	return out.Close()
}
