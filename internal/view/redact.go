package view

import (
	"reflect"
	"strings"

	"github.com/stepfork/stepfork/internal/clip"
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
// render calls redactAll on it before anything is written.
func redactAll(x any) {
	redactWalk(reflect.ValueOf(x), map[uintptr]bool{})
}

func redactWalk(v reflect.Value, seen map[uintptr]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		redactWalk(v.Elem(), seen)
	case reflect.Interface:
		if !v.IsNil() {
			e := v.Elem()
			if e.Kind() == reflect.Pointer {
				redactWalk(e, seen)
			}
		}
	case reflect.Struct:
		if v.Type() == valueType {
			if v.CanSet() {
				pv := v.Interface().(trace.Value)
				var red trace.Value
				if mayAct(pv.Canonical()) {
					red, _ = trace.RedactValue(pv, inertScrubber)
				} else {
					red, _ = trace.RedactValue(pv)
				}
				v.Set(reflect.ValueOf(red))
			}
			return
		}
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() || f.Kind() == reflect.Pointer || f.Kind() == reflect.Slice || f.Kind() == reflect.Map {
				redactWalk(f, seen)
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return // raw bytes (none in the model) are not text
		}
		for i := range v.Len() {
			redactWalk(v.Index(i), seen)
		}
	case reflect.Map:
		iter := v.MapRange()
		type kv struct{ k, v reflect.Value }
		var upd []kv
		for iter.Next() {
			e := reflect.New(iter.Value().Type()).Elem()
			e.Set(iter.Value())
			redactWalk(e, seen)
			upd = append(upd, kv{iter.Key(), e})
		}
		for _, u := range upd {
			v.SetMapIndex(u.k, u.v)
		}
	case reflect.String:
		if v.CanSet() {
			s, _ := trace.RedactString(v.String())
			if s = clip.InertText(s); s != v.String() {
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
