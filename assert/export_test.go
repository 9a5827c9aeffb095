package assert

import (
	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/trace"
)

// EqualCheaply is equalCheaply with TraceOptions and opts, as
// CheckTraceEqual calls it.
func EqualCheaply(want, got *trace.Trace, opts ...cmp.Option) bool {
	return equalCheaply(want, got, dedupe(append([]cmp.Option{traceOptions}, opts...)))
}
