//go:build unix

package trace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestGuardedBundleFiles checks the one path every bundle file is read
// through: what is not a regular file of the bundle, or is above its size
// limit, is refused before it is read, by Load, Open, Reader.Extra and
// VerifyIntegrity alike.
func TestGuardedBundleFiles(t *testing.T) {
	t.Parallel()
	withExtra := func(t *testing.T) string {
		t.Helper()
		tr, err := Load(savedBundle(t))
		if err != nil {
			t.Fatal(err)
		}
		tr.Extras = map[string][]byte{"fork.json": []byte(`{"schema_version": 1}`)}
		dst := filepath.Join(t.TempDir(), "x.sftrace")
		if err := tr.Save(dst); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	fifo := func(t *testing.T, p string) {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	huge := func(t *testing.T, p string) {
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 1<<30); err != nil { // sparse
			t.Fatal(err)
		}
	}
	zero := func(t *testing.T, p string) {
		if err := os.Symlink("/dev/zero", p); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		file    string
		replace func(*testing.T, string)
		want    string // in the error of Load (and of Open, for the files it reads)
		verify  string // the integrity issue, when VerifyIntegrity reads the file
	}{
		{ManifestFile, fifo, "required path is not a file (a named pipe): ", ""},
		{ManifestFile, huge, "manifest.json is 1073741824 bytes, more than the limit of 1048576 bytes for manifest.json", ""},
		{ManifestFile, zero, "is a symbolic link that points outside the bundle (/dev/zero)", ""},
		{RedactionsFile, fifo, "required path is not a file (a named pipe): ", ""},
		{RedactionsFile, huge, "more than the limit of 16777216 bytes for redactions.json", ""},
		{EventsFile, fifo, "required path is not a file (a named pipe): ", ""},
		{IntegrityFile, fifo, "required path is not a file (a named pipe): ", "integrity.json is not a file."},
		{IntegrityFile, huge, "more than the limit of 1048576 bytes for integrity.json", "integrity.json is larger than the limit of 1048576 bytes."},
		{"fork.json", fifo, "required path is not a file (a named pipe): ", "fork.json cannot be verified: it is a named pipe."},
		{"fork.json", huge, "more than the limit of 16777216 bytes for fork.json", "fork.json cannot be verified: it is larger than the limit of 16777216 bytes."},
		{"fork.json", zero, "is a symbolic link that points outside the bundle", "fork.json cannot be verified: it is a symbolic link that points outside the bundle (/dev/zero)"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			dir := withExtra(t)
			p := filepath.Join(dir, tc.file)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			tc.replace(t, p)
			err := loadErr(t, dir)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %q, want it to contain %q", err, tc.want)
			}
			r, oerr := Open(dir)
			switch tc.file {
			case ManifestFile, RedactionsFile, EventsFile:
				if oerr == nil || !strings.Contains(oerr.Error(), tc.want) {
					t.Errorf("Open error = %v, want it to contain %q", oerr, tc.want)
				}
			default:
				if oerr != nil {
					t.Fatalf("Open: %v", oerr)
				}
				defer r.Close()
				if data, err := r.Extra("fork.json"); err == nil || !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Reader.Extra = %q, %v; want an error containing %q", data, err, tc.want)
				}
				res := VerifyIntegrity(dir)
				if res.Status != IntegrityMismatch || len(res.Issues) == 0 || !strings.HasPrefix(res.Issues[0].Message, tc.verify) {
					t.Errorf("VerifyIntegrity = %+v, want a first issue starting %q", res, tc.verify)
				}
			}
		})
	}
}

// TestReaderExtra checks that Reader.Extra reads what integrity.json lists,
// as Load fills Trace.Extras, and nothing else.
func TestReaderExtra(t *testing.T) {
	t.Parallel()
	tr, err := Load(savedBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	tr.Extras = map[string][]byte{"fork.json": []byte(`{"a": 1}`)}
	dir := filepath.Join(t.TempDir(), "x.sftrace")
	if err := tr.Save(dir); err != nil {
		t.Fatal(err)
	}
	writeBundleFile(t, dir, "unlisted.json", "{}")
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := r.Extra("fork.json"); err != nil || string(got) != `{"a": 1}` {
		t.Errorf(`Extra("fork.json") = %q, %v`, got, err)
	}
	if got, err := r.Extra("unlisted.json"); err != nil || got != nil {
		t.Errorf(`Extra("unlisted.json") = %q, %v; want nil, nil (not listed in integrity.json)`, got, err)
	}
	for _, name := range []string{ManifestFile, IntegrityFile, "../x", ".hidden"} {
		if _, err := r.Extra(name); err == nil {
			t.Errorf("Extra(%q) succeeded; want an error", name)
		}
	}
}
