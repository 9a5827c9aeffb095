package diff

import (
	"github.com/stepfork/stepfork/trace"
)

// Bundles compares the runs of the bundles at basePath and variantPath:
// the result is field for field that of Runs(base, variant, opts...) with
// the two bundles loaded ([trace.Load]), except that the Payload of a tool
// or llm step (Step.Base, Step.Variant, Divergence) is absent unless that
// step is changed. An error is the first of those Load reports for the
// base, then the variant.
//
// Bundles reads the two bundles one after the other, one pass each
// decoded on every core ([trace.ReadBehavior]), keeping of their calls
// only a digest of each step's content, and decodes the payloads of the calls again only for
// the aligned steps whose digests differ. Two steps with equal digests
// have equal types, labels and payloads (the digests hash the payloads'
// canonical forms, redacted where redaction changes them), so they are
// unchanged without being compared. The digests are computed from the
// payloads as they are read; the input_hash and output_hash recorded in
// the bundles are never trusted, so a bundle whose recorded hashes do not
// match its payloads is compared by what its payloads hold. The memory
// used is that of the two runs' steps and digests, and, while a bundle is
// read, of its events without their call payloads.
//
// With AlignPosition, or when either bundle records lanes
// ([trace.LanesFile]: concurrent calls are matched by content), Bundles
// loads both bundles and calls Runs.
func Bundles(basePath, variantPath string, opts ...Option) (*Result, error) {
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.positional {
		return loadRuns(basePath, variantPath, opts)
	}
	// One bundle after the other, each decoded on every core: the memory
	// is that of one run's events at a time.
	var bsum, vsum summer
	bstate, vstate := map[string]trace.Value{}, map[string]trace.Value{}
	base, berr := trace.ReadBehavior(basePath, func(ev *trace.Event) { bsum.add(ev); addState(bstate, ev) })
	var variant *trace.DigestedRun
	var verr error
	if berr == nil {
		variant, verr = trace.ReadBehavior(variantPath, func(ev *trace.Event) { vsum.add(ev); addState(vstate, ev) })
	}
	if berr != nil || verr != nil || len(base.Extras[trace.LanesFile]) > 0 || len(variant.Extras[trace.LanesFile]) > 0 {
		// Load gives the error (or, with lanes, the runs to compare).
		return loadRuns(basePath, variantPath, opts)
	}
	bs, vs := base.Steps, variant.Steps
	bd, vd := base.Digests, variant.Digests

	// Number the steps by content, the base's first, as numberSteps and
	// alignNumbered do.
	ids := make(map[trace.StepDigest]int32, len(bs))
	number := func(ds []trace.StepDigest) []int32 {
		out := make([]int32, len(ds))
		for i, dg := range ds {
			id, ok := ids[dg]
			if !ok {
				id = int32(len(ids))
				ids[dg] = id
			}
			out[i] = id
		}
		return out
	}
	bex := number(bd)
	vex := number(vd)
	pairs := alignIDs(bs, vs, bex, vex, int32(len(ids)))

	// Only the aligned steps that differ are compared field by field: read
	// their payloads.
	var bload, vload []int
	for _, p := range pairs {
		if p.b >= 0 && p.v >= 0 && !p.same && bd[p.b] != vd[p.v] {
			bload, vload = append(bload, p.b), append(vload, p.v)
		}
	}
	if err := base.LoadPayloads(bload...); err != nil {
		return nil, err
	}
	if err := variant.LoadPayloads(vload...); err != nil {
		return nil, err
	}

	bp, vp := basePath, variantPath
	if cfg.pathsSet {
		bp, vp = cfg.basePath, cfg.varPath
	}
	d := &Result{}
	d.Base = bsum.summary(&base.Manifest, pythonPath(bp), len(bs))
	d.Variant = vsum.summary(&variant.Manifest, pythonPath(vp), len(vs))
	d.Base.Minted = trace.MintedIDs(&trace.Trace{Extras: base.Extras})
	d.Variant.Minted = trace.MintedIDs(&trace.Trace{Extras: variant.Extras})
	d.addSteps(pairs, bs, vs, func(b, v *trace.BehaviorStep, bi, vi int) bool {
		return b.Type == v.Type && b.Label == v.Label && bd[bi] == vd[vi]
	})
	d.State = stateDeltas(bstate, vstate)
	d.TokensDelta = d.Variant.Tokens - d.Base.Tokens
	d.CostDelta = d.Variant.CostUSD - d.Base.CostUSD
	return d, nil
}

// loadRuns loads the two bundles and compares them with Runs.
func loadRuns(basePath, variantPath string, opts []Option) (*Result, error) {
	base, err := trace.Load(basePath)
	if err != nil {
		return nil, err
	}
	variant, err := trace.Load(variantPath)
	if err != nil {
		return nil, err
	}
	return Runs(base, variant, opts...), nil
}
