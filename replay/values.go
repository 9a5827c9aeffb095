package replay

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/stepfork/stepfork/trace"
)

// valueOf converts a Go value for recording; its errors match
// ErrNotRecordable.
func valueOf(x any) (trace.Value, error) {
	v, err := trace.ValueOf(x)
	if err != nil {
		return trace.Value{}, fmt.Errorf("%w: %w", ErrNotRecordable, err)
	}
	return v, nil
}

// redacted is v after redaction: what a recording holds and what live inputs
// are compared in.
func redacted(v trace.Value) trace.Value {
	r, _ := trace.RedactValue(v)
	return r
}

// redactedText is s with credential patterns replaced, for messages.
func redactedText(s string) string {
	r, _ := trace.RedactString(s)
	return r
}

// preview is the canonical JSON of v cut to 200 characters with an ellipsis
// (stepfork's preview), after redaction.
func preview(v trace.Value) string {
	if v.IsAbsent() {
		v = trace.NullValue
	}
	s := redacted(v).Canonical()
	if utf8.RuneCountInString(s) <= 200 {
		return s
	}
	n := 0
	for i := range s {
		if n == 200 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// previewOrMissing is preview, or "<missing>" for an absent value.
func previewOrMissing(v trace.Value) string {
	if v.IsAbsent() {
		return "<missing>"
	}
	return preview(v)
}

// firstDifference finds the first place where a and b differ, as a path like
// $.items[2].price, and the two values there.
func firstDifference(a, b trace.Value, path string) (string, trace.Value, trace.Value) {
	if a == b {
		return "", a, b
	}
	switch {
	case a.Kind() == trace.Object && b.Kind() == trace.Object:
		for k, av := range a.Members() {
			bv := b.Get(k)
			if bv.IsAbsent() {
				return path + "." + k, av, bv
			}
			if av != bv {
				return firstDifference(av, bv, path+"."+k)
			}
		}
		for k, bv := range b.Members() {
			if a.Get(k).IsAbsent() {
				return path + "." + k, trace.Value{}, bv
			}
		}
	case a.Kind() == trace.Array && b.Kind() == trace.Array:
		as, bs := elems(a), elems(b)
		for i := 0; i < len(as) && i < len(bs); i++ {
			if as[i] != bs[i] {
				return firstDifference(as[i], bs[i], path+"["+strconv.Itoa(i)+"]")
			}
		}
		i := min(len(as), len(bs))
		var av, bv trace.Value
		if i < len(as) {
			av = as[i]
		}
		if i < len(bs) {
			bv = bs[i]
		}
		return path + "[" + strconv.Itoa(i) + "]", av, bv
	}
	return path, a, b
}

func elems(v trace.Value) []trace.Value {
	var out []trace.Value
	for _, e := range v.Elems() {
		out = append(out, e)
	}
	return out
}

// modelFingerprint is stepfork's fingerprint of a model identity: the hash of
// {"model": m, "provider": p} (null provider when there is none).
func modelFingerprint(provider, model string) string {
	p := trace.NullValue
	if provider != "" {
		p = trace.StringValue(provider)
	}
	v, _ := trace.ObjectValue(trace.Member{Key: "model", Value: trace.StringValue(model)}, trace.Member{Key: "provider", Value: p})
	return trace.Hash(v)
}

// descriptor is stepfork's one-line description of a call.
func descriptor(kind CallKind, name, provider, model string) string {
	if kind == KindLLM {
		return fmt.Sprintf("llm provider=%s model='%s' model_fingerprint=%s", pyStr(provider), model, modelFingerprint(provider, model))
	}
	return fmt.Sprintf("%s name='%s'", kind, name)
}
