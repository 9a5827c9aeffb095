// Package fileform gives the packages of this module the JSON writers that
// package trace implements, without making them part of trace's API: a Go
// string quoted as a canonical JSON string, and a canonical JSON text in the
// form events.jsonl holds it (floats with negative exponents printed as
// Pydantic prints them).
//
// Package trace sets the functions when it is initialized, so they may be
// called by any package that imports trace.
package fileform

var (
	// AppendQuoted appends s as a canonical JSON string literal (invalid
	// UTF-8 replaced by U+FFFD).
	AppendQuoted func(dst []byte, s string) []byte
	// AppendValue appends the canonical JSON text canonical ("" is not
	// allowed) in its file form.
	AppendValue func(dst []byte, canonical string) []byte
)
