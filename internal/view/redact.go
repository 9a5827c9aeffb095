package view

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/internal/volatile"
	"github.com/stepfork/stepfork/trace"
)

var valueType = reflect.TypeFor[trace.Value]()

// redactAll passes everything a page shows through trace's redaction, in
// place: every string of the page model (labels, messages, paths, event
// ids, change descriptions) through trace.RedactString and, line by line,
// clip.InertText (so a name cannot hide or reorder text), and every payload
// through trace.RedactValue (values under sensitive keys and credential
// patterns, their strings and keys inert line by line too). Bundles on
// disk are redacted when saved; this is the second,
// independent pass every output of stepfork makes, so a hand-edited bundle
// or a pattern added to trace later cannot reach a page unredacted.
//
// It is the one place pages are redacted: page builders fill the model,
// render calls cleanAll on it before anything is written.
func redactAll(x any) { cleanAll(x, nil) }

// cleanAll redacts the page model x as redactAll says and, in the same
// walk, shows the ids providers minted in the page's runs (minted: id →
// kind, trace.MintedIDs) as placeholders numbered by kind in the order the
// model holds them (<call-1>), in every string and payload, as goldens and
// Explain show them. Redaction comes first: a placeholder never hides a
// secret from it.
func cleanAll(x any, minted map[string]string) {
	var n volatile.Numbering
	w := walker{
		str: func(s string) (string, bool) {
			r, _ := trace.RedactString(s)
			r = n.Minted(clip.InertText(r), minted)
			return r, r != s
		},
		val: func(v trace.Value) trace.Value {
			if mayAct(v.Canonical()) {
				v, _ = trace.RedactValue(v, inertScrubber)
			} else {
				v, _ = trace.RedactValue(v)
			}
			if len(minted) == 0 {
				return v
			}
			s := v.Canonical()
			if r := n.Minted(s, minted); r != s {
				if out, err := trace.ParseValue([]byte(r)); err == nil {
					return out // placeholders stand inside strings: JSON stays JSON
				}
			}
			return v
		},
		ordered: len(minted) > 0,
	}
	w.walk(reflect.ValueOf(x), map[uintptr]bool{})
}

// walker rewrites, in place, every string and payload of a page model, in
// the order the model holds them (map entries by key when ordered: the
// placeholders are numbered in that order).
type walker struct {
	str     func(string) (string, bool)
	val     func(trace.Value) trace.Value
	ordered bool
}

func (w *walker) walk(v reflect.Value, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		w.walk(v.Elem(), seen)
	case reflect.Interface:
		if !v.IsNil() {
			e := v.Elem()
			if e.Kind() == reflect.Pointer {
				w.walk(e, seen)
			}
		}
	case reflect.Struct:
		if v.Type() == valueType {
			if v.CanSet() {
				v.Set(reflect.ValueOf(w.val(v.Interface().(trace.Value))))
			}
			return
		}
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() || f.Kind() == reflect.Pointer || f.Kind() == reflect.Slice || f.Kind() == reflect.Map {
				w.walk(f, seen)
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return // raw bytes (none in the model) are not text
		}
		for i := range v.Len() {
			w.walk(v.Index(i), seen)
		}
	case reflect.Map:
		if !v.CanInterface() {
			return // an unexported map (the page's minted ids) is not shown
		}
		keys := v.MapKeys()
		if w.ordered {
			slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(fmt.Sprint(a.Interface()), fmt.Sprint(b.Interface())) })
		}
		for _, k := range keys {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			w.walk(e, seen)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		if v.CanSet() {
			if s, changed := w.str(v.String()); changed {
				v.SetString(s)
			}
		}
	}
}

// mayAct reports whether canonical JSON text may hold a character
// clip.InertText escapes: a raw one (DEL, C1, bidi, separators) or an
// escaped control character other than a line break or a tab.
func mayAct(c string) bool {
	return strings.ContainsFunc(c, func(r rune) bool { return r >= 0x7f && clip.Acts(r) }) ||
		strings.Contains(c, `\b`) || strings.Contains(c, `\f`) || strings.Contains(c, `\r`) || strings.Contains(c, `\u00`)
}

// inertScrubber makes every string and key of a payload inert, as the
// strings of the page model are.
func inertScrubber(s string) (string, bool) {
	r := clip.InertText(s)
	return r, r != s
}
