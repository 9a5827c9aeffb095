package trace

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// packedVectors lists the shared bundles to pack.
func packedVectors(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, g := range []string{"stepfork/*.sftrace", "stepfork-recorded/*.sftrace"} {
		m, _ := filepath.Glob(filepath.Join(vectorDir, g))
		out = append(out, m...)
	}
	if len(out) < 9 {
		t.Fatalf("found %d vectors", len(out))
	}
	return out
}

// TestPackRoundTrip packs every vector: the packed bundle loads to the same
// trace as the directory, verifies and validates the same way, packs
// reproducibly, and unpacks to the same bytes, file for file.
func TestPackRoundTrip(t *testing.T) {
	t.Parallel()
	for _, src := range packedVectors(t) {
		t.Run(filepath.Base(src), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			packed := filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), ".sftrace")+PackedSuffix)
			if err := Pack(src, packed); err != nil {
				t.Fatal(err)
			}
			want, err := Load(src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Load(packed)
			if err != nil {
				t.Fatalf("Load(packed): %v", err)
			}
			got.Path, want.Path = "", ""
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(Value{})); diff != "" {
				t.Errorf("the packed bundle loads differently (-dir +packed):\n%s", diff)
			}
			if w, g := VerifyIntegrity(src), VerifyIntegrity(packed); w.Status != g.Status || len(w.VerifiedFiles) != len(g.VerifiedFiles) {
				t.Errorf("VerifyIntegrity: dir %v %v, packed %v %v", w.Status, w.VerifiedFiles, g.Status, g.VerifiedFiles)
			}
			for _, p := range []string{src, packed} {
				tr, res, err := LoadVerified(p)
				if err != nil {
					t.Fatalf("LoadVerified(%s): %v", p, err)
				}
				tr.Path = ""
				if diff := cmp.Diff(want, tr, cmp.AllowUnexported(Value{})); diff != "" {
					t.Errorf("LoadVerified(%s) loads differently (-Load +LoadVerified):\n%s", p, diff)
				}
				if diff := cmp.Diff(VerifyIntegrity(p), res); diff != "" {
					t.Errorf("LoadVerified(%s) integrity (-VerifyIntegrity +LoadVerified):\n%s", p, diff)
				}
			}
			for _, opts := range [][]ValidateOption{{CheckIntegrity()}, {Partial()}} {
				w, g := ValidateBundle(context.Background(), src, opts...), ValidateBundle(context.Background(), packed, opts...)
				if w.Valid() != g.Valid() || len(w.Issues) != len(g.Issues) {
					t.Errorf("ValidateBundle: dir %v, packed %v", w.Issues, g.Issues)
				}
			}

			again := filepath.Join(t.TempDir(), filepath.Base(packed))
			if err := Pack(src, again); err != nil {
				t.Fatal(err)
			}
			a, _ := os.ReadFile(packed)
			b, _ := os.ReadFile(again)
			if !bytes.Equal(a, b) {
				t.Error("packing the same bundle twice gave different bytes")
			}

			out := filepath.Join(dir, "out.sftrace")
			if err := Unpack(packed, out); err != nil {
				t.Fatal(err)
			}
			ob, err := openBundle(src)
			if err != nil {
				t.Fatal(err)
			}
			names, _ := bundleFiles(ob)
			ob.Close()
			for _, n := range names {
				w, _ := os.ReadFile(filepath.Join(src, n))
				g, err := os.ReadFile(filepath.Join(out, n))
				if err != nil || !bytes.Equal(w, g) {
					t.Errorf("%s: unpacked bytes differ (%v)", n, err)
				}
			}
		})
	}
}

func TestPackOverwrite(t *testing.T) {
	t.Parallel()
	src := filepath.Join(vectorDir, "stepfork", "successful_run.sftrace")
	dir := t.TempDir()
	dst := filepath.Join(dir, "run"+PackedSuffix)
	if err := Pack(src, dst); err != nil {
		t.Fatal(err)
	}
	if err := Pack(src, dst); !errors.Is(err, fs.ErrExist) {
		t.Errorf("packing over an existing file: %v, want fs.ErrExist", err)
	}
	if err := Pack(src, dst, Overwrite()); err != nil {
		t.Errorf("with Overwrite: %v", err)
	}
	if err := Pack(src, filepath.Join(dir, "run.tgz")); err == nil || !strings.Contains(err.Error(), "must end with .sftrace.tar.gz") {
		t.Errorf("a name without the suffix: %v", err)
	}
	if err := Pack(dst, filepath.Join(dir, "x"+PackedSuffix)); err == nil || !strings.Contains(err.Error(), "packed already") {
		t.Errorf("packing a packed bundle: %v", err)
	}
	out := filepath.Join(dir, "out.sftrace")
	if err := Unpack(dst, out); err != nil {
		t.Fatal(err)
	}
	if err := Unpack(dst, out); err == nil {
		t.Error("unpacking over an existing bundle without Overwrite succeeded")
	}
	if err := Unpack(dst, out, Overwrite()); err != nil {
		t.Errorf("with Overwrite: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left behind: %v", entries)
	}
}

// archive builds a gzip-compressed tar of the given entries.
func archive(t testing.TB, entries ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		body := []byte("{}")
		if h.Typeflag == tar.TypeReg || h.Typeflag == 0 {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write(body)
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// TestPackedCorrupt feeds Load packed files that are not sound: each is
// refused with an error naming the file, matching ErrCorruptPacked where the
// archive itself is at fault.
func TestPackedCorrupt(t *testing.T) {
	t.Parallel()
	src := filepath.Join(vectorDir, "stepfork-recorded", "run_1000_calls.sftrace")
	dir := t.TempDir()
	good := filepath.Join(dir, "good"+PackedSuffix)
	if err := Pack(src, good); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(good)
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 0x55
	crc := bytes.Clone(data)
	crc[len(crc)-6] ^= 0xff // the gzip trailer's CRC-32

	reg := func(name string) *tar.Header { return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644} }
	many := []*tar.Header{{Typeflag: tar.TypeDir, Name: "a.sftrace/"}}
	for i := range maxPackedMembers + 1 {
		many = append(many, reg("a.sftrace/x"+strings.Repeat("y", i)+".json"))
	}
	tests := []struct {
		name    string
		data    []byte
		corrupt bool   // the error matches ErrCorruptPacked
		want    string // in the message
	}{
		{"not gzip", []byte("plain text, not an archive"), true, "not gzip-compressed"},
		{"truncated", data[:len(data)/3], true, "unexpected EOF"},
		{"flipped byte", flipped, false, ""},
		{"bad checksum", crc, true, "checksum"},
		{"symlink entry", archive(t, &tar.Header{Typeflag: tar.TypeSymlink, Name: "a.sftrace/manifest.json", Linkname: "/etc/passwd"}), true, "not a regular file"},
		{"escaping entry", archive(t, reg("a.sftrace/../../manifest.json")), true, "not a path inside the bundle"},
		{"absolute entry", archive(t, reg("/a.sftrace/manifest.json")), true, "not a path inside the bundle"},
		{"no top directory", archive(t, reg("manifest.json")), true, "not a file of the bundle directory"},
		{"two bundles", archive(t, reg("a.sftrace/redactions.json"), reg("b.sftrace/manifest.json")), true, "entries of two bundles"},
		{"too many entries", archive(t, many...), true, "more than 64 entries"},
		{"empty archive", archive(t), false, "missing required file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(t.TempDir(), "bad"+PackedSuffix)
			if err := os.WriteFile(p, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p)
			if err == nil {
				// A flipped byte may leave gzip readable; integrity catches it.
				if r := VerifyIntegrity(p); r.Status == IntegrityVerified {
					t.Fatalf("a corrupted packed bundle loaded and verified")
				}
				return
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("the error does not name the file: %v", err)
			}
			if tt.corrupt && !errors.Is(err, ErrCorruptPacked) {
				t.Errorf("err = %v, want ErrCorruptPacked", err)
			}
			if tt.want != "" && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to say %q", err, tt.want)
			}
			if rep := ValidateBundle(context.Background(), p, CheckIntegrity()); rep.Valid() {
				t.Errorf("ValidateBundle accepted it")
			}
		})
	}
}

// FuzzPacked loads arbitrary bytes as a packed bundle: an error or a trace,
// never a panic; and what loads unpacks to a directory that loads to the
// same trace. Its inputs are whole archives, and the fuzzer's default of up
// to a minute minimizing each new input leaves it nearly idle; fuzz it with
// a short minimization:
//
//	go test ./trace -run '^$' -fuzz '^FuzzPacked$' -fuzztime 5m -fuzzminimizetime 3s
func FuzzPacked(f *testing.F) {
	src := filepath.Join(vectorDir, "stepfork", "failed_tool_run.sftrace")
	p := filepath.Join(f.TempDir(), "seed"+PackedSuffix)
	if err := Pack(src, p); err != nil {
		f.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add(archive(f, &tar.Header{Typeflag: tar.TypeReg, Name: "a.sftrace/manifest.json"}))
	for name, entries := range hostileArchives(f) {
		if name == "ratio bomb" || strings.HasPrefix(name, "declared") {
			continue // large seeds slow every fuzzing run down
		}
		h := filepath.Join(f.TempDir(), "h"+PackedSuffix)
		writeArchive(f, h, entries)
		b, _ := os.ReadFile(h)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "f"+PackedSuffix)
		os.WriteFile(p, data, 0o644)
		tr, err := Load(p)
		VerifyIntegrity(p)
		ValidateBundle(context.Background(), p, CheckIntegrity())
		// sftest.Load's load, which hashes every payload as it reads it,
		// reads what Load reads, or refuses what Load refuses.
		if htr, _, hashed, _, herr := loadHashed(p); (herr == nil) != (err == nil) {
			t.Fatalf("Load: %v; the hashing load: %v", err, herr)
		} else if err == nil && (!reflect.DeepEqual(htr, tr) || len(hashed) != (len(tr.Events)+63)/64) {
			t.Fatalf("the hashing load read another trace than Load, or %d words of notes for %d events", len(hashed), len(tr.Events))
		}
		// A reader that stops after one event sees what Load sees of the
		// archive: Close reads it to its end.
		var partial error
		if r, oerr := Open(p); oerr != nil {
			partial = oerr
		} else {
			for range r.Events() {
				break
			}
			partial = r.Close()
		}
		if err == nil && partial != nil {
			t.Fatalf("Load read it, Open, one event and Close refused it: %v", partial)
		}
		if errors.Is(err, ErrCorruptPacked) && partial == nil {
			t.Fatalf("Load refused the archive (%v), Open, one event and Close did not", err)
		}
		if err != nil {
			return
		}
		out := filepath.Join(dir, "out.sftrace")
		if err := Unpack(p, out); err != nil {
			t.Fatalf("Load read it, Unpack refused it: %v", err)
		}
		again, err := Load(out)
		if err != nil {
			t.Fatalf("Load read it, but not unpacked: %v", err)
		}
		tr.Path, again.Path = "", ""
		if diff := cmp.Diff(tr, again, cmp.AllowUnexported(Value{})); diff != "" {
			t.Fatalf("unpacked, it loads differently:\n%s", diff)
		}
	})
}
