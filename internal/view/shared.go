package view

import "html/template"

// Stylesheet is the style sheet of every page, for a page built elsewhere
// (the explore page of package sftest) to look like these.
func Stylesheet() template.CSS { return css() }

// Redact passes everything x points to through trace's redaction, in
// place, as Render does with a page before writing it (see redactAll): for
// a model built elsewhere that is shown beside these pages.
func Redact(x any) { redactAll(x) }
