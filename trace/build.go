package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// BuildFile is the extra bundle file ([Trace.Extras]) that says which code
// made the run: the agent's module, its version and its VCS revision, as
// [Build] holds them. Like every extra file it is listed in, and verified
// by, integrity.json; Python stepfork, whose manifest rejects keys it does
// not know, ignores it. A run recorded by Python stepfork, or by a Go
// version of stepfork that predates it, has none.
//
// The file is a JSON object, written with sorted keys and a final newline;
// only "schema_version" and "module" are always present:
//
//	{
//	  "go": "go1.26.1",
//	  "modified": true,
//	  "module": "example.com/support",
//	  "revision": "46b7ad0c4abd65b7e0efec1149cdb0d7ddcb7ecd",
//	  "schema_version": 1,
//	  "time": "2026-03-14T09:30:00Z",
//	  "version": "(devel)"
//	}
const BuildFile = "build.json"

// buildSchemaVersion is the schema_version of the build.json this package
// writes and the only one it reads.
const buildSchemaVersion = 1

// Build identifies the code that made a run ([BuildFile]).
type Build struct {
	// Module is the module path of the agent's code.
	Module string
	// Version is the module's version: a release ("v1.4.0"), a
	// pseudo-version ("v0.0.0-20260314093000-46b7ad0c4abd"), or "(devel)"
	// for the main module of a binary built from a working tree.
	Version string
	// Revision is the VCS revision (the commit hash, in full when known, or
	// the 12-digit prefix of a pseudo-version); "" when unknown.
	Revision string
	// Time is the commit time of Revision; zero when unknown.
	Time time.Time
	// Modified says the working tree held uncommitted changes when the
	// binary was built. It is known only when the toolchain stamped the
	// build (go build in a repository, go test -buildvcs=true); otherwise
	// it is false.
	Modified bool
	// Go is the Go version the binary was built with ("go1.26.1").
	Go string
}

// buildWire is build.json. Its fields are in the order of their keys, so
// that encoding/json writes them sorted, as BuildFile is.
type buildWire struct {
	Go            string `json:"go,omitempty"`
	Modified      bool   `json:"modified,omitempty"`
	Module        string `json:"module"`
	Revision      string `json:"revision,omitempty"`
	SchemaVersion int    `json:"schema_version"`
	Time          string `json:"time,omitempty"`
	Version       string `json:"version,omitempty"`
}

// MarshalBuild encodes b as the [BuildFile]. The module is required; a
// revision must be lowercase hexadecimal (a commit hash or a prefix of one
// of at least 7 digits). Texts are redacted like every payload of a bundle.
func MarshalBuild(b Build) ([]byte, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	w := buildWire{SchemaVersion: buildSchemaVersion, Module: redactBuildText(b.Module), Version: redactBuildText(b.Version),
		Revision: b.Revision, Modified: b.Modified, Go: redactBuildText(b.Go)}
	if !b.Time.IsZero() {
		w.Time = b.Time.UTC().Format(time.RFC3339)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// redactBuildText is s redacted, each byte of invalid UTF-8 replaced by
// U+FFFD, as encoding/json reads it (and writes it as an escape, which
// build.json does not hold).
func redactBuildText(s string) string {
	r, _ := RedactString(s)
	if !utf8.ValidString(r) {
		r = string([]rune(r))
	}
	return r
}

func (b Build) check() error {
	switch {
	case strings.TrimSpace(b.Module) == "":
		return fmt.Errorf("%s: the module is empty", BuildFile)
	case b.Revision != "" && !isRevision(b.Revision):
		return fmt.Errorf("%s: revision %q is not a commit hash (7 to 64 lowercase hexadecimal digits)", BuildFile, b.Revision)
	}
	return nil
}

// isRevision reports whether s is a commit hash or a prefix of one: 7 to
// 64 lowercase hexadecimal digits. (Not a regular expression: compiling
// one cost the first recording of every process half a millisecond.)
func isRevision(s string) bool { return len(s) >= 7 && len(s) <= 64 && isLowerHex(s) }

// ParseBuild decodes a [BuildFile]. Anything else than the object
// MarshalBuild writes, of schema version 1, is an error naming the problem:
// an unknown key, a missing module, a revision that is not a commit hash, a
// time that is not RFC 3339.
func ParseBuild(data []byte) (Build, error) {
	var w buildWire
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Build{}, fmt.Errorf("%s: %w", BuildFile, err)
	}
	if dec.More() {
		return Build{}, fmt.Errorf("%s: more than one JSON value", BuildFile)
	}
	if w.SchemaVersion != buildSchemaVersion {
		return Build{}, fmt.Errorf("%s: unsupported schema_version %d (this version of stepfork reads %d)", BuildFile, w.SchemaVersion, buildSchemaVersion)
	}
	b := Build{Module: w.Module, Version: w.Version, Revision: w.Revision, Modified: w.Modified, Go: w.Go}
	if w.Time != "" {
		t, err := time.Parse(time.RFC3339, w.Time)
		if err != nil {
			return Build{}, fmt.Errorf("%s: time %q is not an RFC 3339 time", BuildFile, w.Time)
		}
		b.Time = t.UTC()
	}
	if err := b.check(); err != nil {
		return Build{}, err
	}
	return b, nil
}

// Build returns the [Build] recorded in the trace's [BuildFile]; ok is
// false when the trace has none (a recording by Python stepfork, or by an
// earlier version of this module). A malformed file is an error.
func (t *Trace) Build() (b Build, ok bool, err error) {
	data, has := t.Extras[BuildFile]
	if !has {
		return Build{}, false, nil
	}
	b, err = ParseBuild(data)
	if err != nil {
		return Build{}, false, err
	}
	return b, true, nil
}

// Short is the revision cut to 12 digits, as go and git print it, or "".
func (b Build) Short() string {
	if len(b.Revision) > 12 {
		return b.Revision[:12]
	}
	return b.Revision
}

// String is one line for people: "example.com/support (devel), revision
// 46b7ad0c4abd of 2026-03-14, modified, go1.26.1"; the parts that are
// unknown are left out.
func (b Build) String() string {
	var s strings.Builder
	s.WriteString(b.Module)
	if b.Version != "" {
		s.WriteString(" " + b.Version)
	}
	if b.Revision != "" {
		s.WriteString(", revision " + b.Short())
		if !b.Time.IsZero() {
			s.WriteString(" of " + b.Time.UTC().Format(time.DateOnly))
		}
	}
	if b.Modified {
		s.WriteString(", modified")
	}
	if b.Go != "" {
		s.WriteString(", " + b.Go)
	}
	return s.String()
}
