package sftest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stepfork/stepfork/replay"
)

// benchCorpus records n runs of a small agent (a model call, two tools, a
// state write; every fourth run fails) into a directory, once per n.
func benchCorpus(b *testing.B, n int) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("stepfork-bench-corpus-%d", n))
	if m, _ := filepath.Glob(filepath.Join(dir, "*.sftrace")); len(m) == n {
		return dir
	}
	os.RemoveAll(dir)
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("run-%05d.sftrace", i))
		res, err := replay.Record(context.Background(), "bench", i, benchAgent, replay.SaveTo(p))
		if res == nil || res.Path == "" {
			b.Fatal(err)
		}
	}
	return dir
}

var (
	benchLookup = replay.Tool("lookup", func(_ context.Context, i int) (map[string]any, error) {
		return map[string]any{"id": i, "tier": "gold"}, nil
	})
	benchScore = replay.Tool("score", func(_ context.Context, i int) (int, error) { return i * 7 % 100, nil })
	benchAgent = replay.Typed(func(ctx context.Context, i int) (int, error) {
		resp, err := replay.LLM(ctx, replay.Request{Model: "fake", Messages: []replay.Message{{Role: "user", Content: fmt.Sprint(i)}}},
			func(context.Context, replay.Request) (replay.Response, error) {
				return replay.Response{Content: "go"}, nil
			})
		if err != nil {
			return 0, err
		}
		if _, err := benchLookup(ctx, i); err != nil {
			return 0, err
		}
		s, err := benchScore(ctx, i)
		if err != nil {
			return 0, err
		}
		replay.Set(ctx, "score", s)
		if i%4 == 0 {
			return 0, fmt.Errorf("run %d: %s", i, resp.Content)
		}
		return s, nil
	})
)

// BenchmarkCorpus replays corpora of 100 and 1,000 recorded bundles, frozen,
// as Corpus does for each bundle (load, replay, outcome): the time per
// bundle (ns/bundle) stays flat as the corpus grows, so a corpus replays in
// time linear in its size. The corpora are recorded once into the
// temporary directory and kept for later runs.
func BenchmarkCorpus(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dir := benchCorpus(b, n)
			bundles, err := corpusBundles(dir)
			if err != nil || len(bundles) != n {
				b.Fatalf("%d bundles, %v", len(bundles), err)
			}
			b.ResetTimer()
			for b.Loop() {
				for _, bu := range bundles {
					if r := runBundle(b, bu, benchAgent, &corpusConfig{}, nil); r.outcome != "replayed" {
						b.Fatalf("%s: %s", bu.name, r.outcome)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/bundle")
		})
	}
}
