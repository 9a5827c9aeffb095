package fork

import (
	"time"

	"github.com/stepfork/stepfork/trace"
)

// testOpts gathers the options of a static fork the tests vary, so that
// tables can hold them.
type testOpts struct {
	Overrides  []TraceOption
	OutputPath string
	Overwrite  bool
	RunID      string
	Now        func() time.Time
}

func (o testOpts) list() []TraceOption {
	opts := append([]TraceOption(nil), o.Overrides...)
	if o.OutputPath != "" {
		var save []trace.SaveOption
		if o.Overwrite {
			save = append(save, trace.Overwrite())
		}
		opts = append(opts, SaveTo(o.OutputPath, save...))
	}
	if o.RunID != "" || o.Now != nil {
		opts = append(opts, traceOptionFunc(func(c *traceConfig) { c.runID, c.now = o.RunID, o.Now }))
	}
	return opts
}

// forkMem forks a loaded trace without saving it.
func forkMem(tr *trace.Trace, cut Cut, o testOpts) (*trace.Trace, *Info, error) {
	res, err := Trace(tr, cut, o.list()...)
	if err != nil {
		return nil, nil, err
	}
	return res.Trace, res.Info, nil
}
