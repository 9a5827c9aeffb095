package trace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tarEntry is one entry of a hand-made archive: a header and its bytes.
type tarEntry struct {
	hdr  tar.Header
	body []byte
}

// packedFiles returns the entries Pack writes for the bundle at src, in
// its order: the top directory, the small files, events.jsonl.
func packedFiles(t testing.TB, src, top string) []tarEntry {
	t.Helper()
	b, err := openBundle(src)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	names, err := bundleFiles(b)
	if err != nil {
		t.Fatal(err)
	}
	out := []tarEntry{{hdr: tar.Header{Typeflag: tar.TypeDir, Name: top + "/", Mode: 0o755}}}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, regEntry(top+"/"+n, data))
	}
	return out
}

func regEntry(name string, body []byte) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}, body: body}
}

// writeArchive writes the entries as a gzip-compressed tar at path.
func writeArchive(t testing.TB, path string, entries []tarEntry) {
	t.Helper()
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := e.hdr
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		if len(e.body) > 0 {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hostileArchives are packed bundles that hold a valid bundle and
// something more, or something else: each must be refused by every reader.
func hostileArchives(t testing.TB) map[string][]tarEntry {
	t.Helper()
	src := filepath.Join(vectorDir, "stepfork", "failed_tool_run.sftrace")
	other := filepath.Join(vectorDir, "stepfork", "successful_run.sftrace")
	good := packedFiles(t, src, "run.sftrace")
	after := func(extra ...tarEntry) []tarEntry {
		return append(append([]tarEntry{}, good...), extra...)
	}
	before := func(extra ...tarEntry) []tarEntry {
		return append(append([]tarEntry{good[0]}, extra...), good[1:]...)
	}
	otherFiles := packedFiles(t, other, "run.sftrace")
	manifestOther, _ := os.ReadFile(filepath.Join(other, ManifestFile))
	special := func(typ byte, name, link string) tarEntry {
		return tarEntry{hdr: tar.Header{Typeflag: typ, Name: name, Linkname: link, Mode: 0o644, Devmajor: 1, Devminor: 5}}
	}
	many := append([]tarEntry{}, good[:len(good)-1]...)
	for i := range maxPackedMembers {
		many = append(many, regEntry("run.sftrace/x"+strings.Repeat("y", i)+".json", []byte("{}")))
	}
	many = append(many, good[len(good)-1])
	line := bytes.SplitAfter(good[len(good)-1].body, []byte("\n"))[0]
	lines := bytes.Repeat(line, (20<<20)/len(line)+1) // 20 MiB of one valid line
	huge := regEntry("run.sftrace/"+EventsFile, nil)
	huge.hdr.Size = 4 << 30
	unlisted := regEntry("run.sftrace/big.json", nil)
	unlisted.hdr.Size = 4 << 30
	return map[string][]tarEntry{
		"absolute path after events":   after(regEntry("/etc/x.json", []byte("{}"))),
		"dot-dot path after events":    after(regEntry("run.sftrace/../../x.json", []byte("{}"))),
		"hardlink after events":        after(special(tar.TypeLink, "run.sftrace/fork.json", "/etc/passwd")),
		"symlink after events":         after(special(tar.TypeSymlink, "run.sftrace/fork.json", "/dev/zero")),
		"char device after events":     after(special(tar.TypeChar, "run.sftrace/fork.json", "")),
		"block device after events":    after(special(tar.TypeBlock, "run.sftrace/fork.json", "")),
		"fifo after events":            after(special(tar.TypeFifo, "run.sftrace/fork.json", "")),
		"contiguous file after events": after(tarEntry{hdr: tar.Header{Typeflag: tar.TypeCont, Name: "run.sftrace/fork.json", Size: 2}, body: []byte("{}")}),
		"second bundle after events":   after(otherFiles[1:]...),
		"other directory after events": after(special(tar.TypeDir, "other.sftrace/", "")),
		"nested directory after":       after(special(tar.TypeDir, "run.sftrace/sub/", "")),
		"duplicate events":             after(good[len(good)-1]),
		"duplicate manifest after":     after(regEntry("run.sftrace/"+ManifestFile, manifestOther)),
		"unlisted extra after events":  after(regEntry("run.sftrace/fork.json", []byte("{}"))),
		"other manifest first":         before(regEntry("run.sftrace/"+ManifestFile, manifestOther)),
		"other bundle first":           append(append([]tarEntry{}, otherFiles[:len(otherFiles)-1]...), good[1:]...),
		"unlisted extra first":         before(regEntry("run.sftrace/notes.json", []byte("{}"))),
		"symlink first":                before(special(tar.TypeSymlink, "run.sftrace/fork.json", "../../etc/passwd")),
		"hardlink first":               before(special(tar.TypeLink, "run.sftrace/fork.json", "run.sftrace/manifest.json")),
		"device first":                 before(special(tar.TypeChar, "run.sftrace/fork.json", "")),
		"fifo first":                   before(special(tar.TypeFifo, "run.sftrace/fork.json", "")),
		"global header first":          before(tarEntry{hdr: tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "g", PAXRecords: map[string]string{"comment": "x"}}}),
		"top directory twice":          before(good[0]),
		"more than 64 entries":         many,
		"ratio bomb":                   append(append([]tarEntry{}, good[:len(good)-1]...), regEntry("run.sftrace/"+EventsFile, lines)),
		"declared 4 GiB events":        append(append([]tarEntry{}, good[:len(good)-1]...), huge),
		"declared 4 GiB unlisted":      before(unlisted),
	}
}

// TestPackedHostile checks that every reader of a packed bundle refuses
// an archive that holds more than, or other than, one bundle: Load, Open,
// ReadBehavior, VerifyIntegrity, ValidateBundle and Unpack, each with an
// error matching ErrCorruptPacked (or an integrity mismatch), never a
// verified or valid bundle, and never the run of another bundle.
func TestPackedHostile(t *testing.T) {
	t.Parallel()
	for name, entries := range hostileArchives(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			p := filepath.Join(dir, "run"+PackedSuffix)
			if strings.HasPrefix(name, "declared 4 GiB") {
				writeTruncated(t, p, entries)
			} else {
				writeArchive(t, p, entries)
			}
			if _, err := Load(p); err == nil {
				t.Error("Load accepted it")
			} else if !errors.Is(err, ErrCorruptPacked) {
				t.Errorf("Load: %v, want ErrCorruptPacked", err)
			}
			if _, err := ReadBehavior(p, nil); err == nil {
				t.Error("ReadBehavior accepted it")
			}
			// A reader that stops after the first event still refuses it:
			// Close reads the archive to its end.
			if r, err := Open(p); err == nil {
				for _, err := range r.Events() {
					if err != nil {
						t.Logf("Events: %v", err)
					}
					break
				}
				if err := r.Close(); !errors.Is(err, ErrCorruptPacked) {
					t.Errorf("Open, one event, Close: %v, want ErrCorruptPacked", err)
				}
			} else if !errors.Is(err, ErrCorruptPacked) {
				t.Errorf("Open: %v, want ErrCorruptPacked", err)
			}
			if res := VerifyIntegrity(p); res.Status == IntegrityVerified {
				t.Errorf("VerifyIntegrity verified it: %+v", res)
			}
			for _, opts := range [][]ValidateOption{nil, {CheckIntegrity()}, {Partial()}} {
				if rep := ValidateBundle(context.Background(), p, opts...); rep.Valid() || rep.Integrity != nil && rep.Integrity.Status == IntegrityVerified {
					t.Errorf("ValidateBundle(%d options) accepted it", len(opts))
				}
			}
			out := filepath.Join(dir, "out.sftrace")
			if err := Unpack(p, out); err == nil {
				t.Error("Unpack accepted it")
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("Unpack left %v", ents)
			}
		})
	}
}

// writeTruncated writes the entries as an archive cut off inside its last
// entry, whose header declares more bytes than it holds: a reader must
// refuse it from its header, before reading a byte of it.
func writeTruncated(t testing.TB, path string, entries []tarEntry) {
	t.Helper()
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := e.hdr
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if len(e.body) > 0 {
			tw.Write(e.body)
		}
		if h.Size > int64(len(e.body)) {
			tw.Write(make([]byte, 1<<20)) // a megabyte of the 4 GiB
			break
		}
	}
	tw.Flush()
	gz.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPackedBudgetMessages checks what the refusals say.
func TestPackedBudgetMessages(t *testing.T) {
	t.Parallel()
	archives := hostileArchives(t)
	for name, want := range map[string]string{
		"ratio bomb":                 "decompression bomb",
		"declared 4 GiB events":      "more than 1073741824 bytes uncompressed",
		"declared 4 GiB unlisted":    "more than 1073741824 bytes uncompressed",
		"other manifest first":       `"run.sftrace/manifest.json" appears twice`,
		"unlisted extra first":       `"notes.json" is not a file integrity.json lists`,
		"second bundle after events": "follows events.jsonl",
		"hardlink after events":      "follows events.jsonl",
		"more than 64 entries":       "more than 64 entries",
		"hardlink first":             "not a regular file",
	} {
		p := filepath.Join(t.TempDir(), "run"+PackedSuffix)
		if strings.HasPrefix(name, "declared") {
			writeTruncated(t, p, archives[name])
		} else {
			writeArchive(t, p, archives[name])
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: Load: %v, want an error naming the file and saying %q", name, err, want)
		}
	}
}

// TestPackLeftovers checks that a pack removes the temporary files that
// packs of the same path killed before they finished left, and leaves
// those of a live pack alone.
func TestPackLeftovers(t *testing.T) {
	t.Parallel()
	src := filepath.Join(vectorDir, "stepfork", "successful_run.sftrace")
	dir := t.TempDir()
	dst := filepath.Join(dir, "run"+PackedSuffix)
	dead := filepath.Join(dir, ".run"+PackedSuffix+tmpInfix+"123")
	live := filepath.Join(dir, ".run"+PackedSuffix+tmpInfix+"456")
	for _, p := range []string{dead, live} {
		if err := os.WriteFile(p, []byte("partial archive"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := lockDir(live)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.release()
	if err := Pack(src, dst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dead); err == nil {
		t.Error("the leftover of a dead pack is still there")
	}
	if lock.f != nil {
		if _, err := os.Lstat(live); err != nil {
			t.Error("the file of a live pack was removed")
		}
	}
}

// TestPackOverBudget checks that Pack refuses a bundle whose files are more
// than a packed bundle may hold, before it compresses anything: every
// reader would refuse the archive it made. (events.jsonl is sparse: nothing
// is written.)
func TestPackOverBudget(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "big.sftrace")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(vectorDir, "stepfork", "successful_run.sftrace"))); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(src, EventsFile), maxPackedBytes); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "big"+PackedSuffix)
	err := Pack(src, dst)
	if err == nil || !strings.Contains(err.Error(), "more than the 1073741824 bytes a packed bundle may hold") || !strings.Contains(err.Error(), src) {
		t.Errorf("Pack of a bundle of more than 1 GiB: %v, want a refusal naming it", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dst)); len(entries) != 0 {
		t.Errorf("the refused pack left %v", entries)
	}
}
