// Package fileform gives the packages of this module the JSON writers that
// package trace implements, without making them part of trace's API: a Go
// string quoted as a canonical JSON string, a canonical JSON text in the
// form events.jsonl holds it (floats with negative exponents printed as
// Pydantic prints them), and a float in that form.
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
	// AppendFloat appends the finite float f as Pydantic's dump_json prints
	// it in events.jsonl: like Python's repr, but in decimal notation from
	// 1e-05 upwards and without zero padding in negative exponents (0.00001,
	// 1e-7, 1e+16).
	AppendFloat func(dst []byte, f float64) []byte
)
