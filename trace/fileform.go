package trace

import "github.com/stepfork/stepfork/internal/fileform"

// The JSON writers sibling packages share (the run diff's JSON renders
// values exactly as events.jsonl holds them).
func init() {
	fileform.AppendQuoted = appendQuoted
	fileform.AppendValue = func(dst []byte, canonical string) []byte { return appendFileForm(dst, Value{canonical}) }
	fileform.AppendFloat = appendFloatPydantic
}
