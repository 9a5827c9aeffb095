package trace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Benchmarks of the hot paths. The bundles they read are generated once per
// test binary, only when a benchmark asks for them, so `go test ./...`
// stays fast. Figures and the command that produced them: BENCHMARKS.md at the module root.

// benchSizes are the event counts of the generated bundles.
var benchSizes = []int{1_000, 10_000, 100_000}

// fixtureSizes add the size of a test's fixture, a bundle of a few
// kilobytes that a test loads and verifies on every run.
var fixtureSizes = append([]int{20}, benchSizes...)

// benchBundles caches the generated bundles of this process.
var benchBundles struct {
	sync.Mutex
	dir   string
	paths map[int]string
}

func TestMain(m *testing.M) {
	crashChild() // a child of TestOverwriteCrash does its part and exits
	code := m.Run()
	if benchBundles.dir != "" {
		os.RemoveAll(benchBundles.dir)
	}
	os.Exit(code)
}

// benchBundle returns the path of a saved bundle of n events, generating it
// on first use.
func benchBundle(b *testing.B, n int) string {
	b.Helper()
	benchBundles.Lock()
	defer benchBundles.Unlock()
	if p, ok := benchBundles.paths[n]; ok {
		return p
	}
	if benchBundles.dir == "" {
		dir, err := os.MkdirTemp("", "stepfork-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchBundles.dir, benchBundles.paths = dir, map[int]string{}
	}
	p := filepath.Join(benchBundles.dir, fmt.Sprintf("run_%d.sftrace", n))
	if err := benchTrace(n).Save(p); err != nil {
		b.Fatal(err)
	}
	benchBundles.paths[n] = p
	return p
}

func eventsSize(b *testing.B, bundle string) int64 {
	b.Helper()
	st, err := os.Stat(filepath.Join(bundle, EventsFile))
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}

// Words for payload text: ASCII, accented Latin, Devanagari, emoji, and
// characters that canonical JSON escapes.
var benchWords = strings.Fields(`Kathmandu Lisbon Zürich façade naïve brûlée ünïcödé काठमाडौँ नमस्ते ✈ ☃ 🚀 😀
	refund ledger checkout timeout alpha bravo p95 x=1;y=2 say\"hi\" back\\slash tab\tend line\nbreak`)

// benchText returns about n bytes of words.
func benchText(r *rand.Rand, n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(benchWords[r.IntN(len(benchWords))])
		sb.WriteByte(' ')
	}
	return sb.String()
}

// benchPayload returns the JSON text (in events.jsonl's number style, so
// 0.00001 rather than 1e-05) of a realistic payload of about 1 KiB for
// event i of the given type.
func benchPayload(r *rand.Rand, i int, typ EventType) string {
	f := func() string { // prices, ratios at full precision, small measures
		switch r.IntN(3) {
		case 0:
			return string(appendFloatPydantic(nil, float64(r.IntN(1000000))/100))
		case 1:
			return string(appendFloatPydantic(nil, float64(r.IntN(100000))/float64(1+r.IntN(1000))))
		}
		return string(appendFloatPydantic(nil, float64(r.IntN(1000))*1e-7))
	}
	switch typ {
	case LLMRequest:
		return fmt.Sprintf(`{"messages":[{"role":"system","content":"You are a careful agent.\nAnswer in JSON."},{"role":"user","content":"step %d: %s"},{"role":"assistant","content":"%s"}],"temperature":0.61,"top_p":0.00001,"max_tokens":512,"stop":null,"tools":[{"name":"lookup","schema":{"type":"object","properties":{"id":{"type":"string"}}}}]}`,
			i, benchText(r, 420), benchText(r, 260))
	case LLMResponse:
		return fmt.Sprintf(`{"choices":[{"index":0,"finish_reason":"stop","logprob":-%s,"message":{"role":"assistant","content":"%s"}}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"cost":0.00001},"id":"resp_%d","model":"fake-model-1"}`,
			f(), benchText(r, 760), r.IntN(5000), r.IntN(900), i)
	case ToolCall:
		return fmt.Sprintf(`{"customer":{"id":"c%d","name":"%s","tags":["vip","%s"],"address":{"city":"Kathmandu","lines":["%s","%s"]}},"limit":%d,"threshold":%s,"filters":{"since":"2026-01-01","currencies":["NPR","EUR","USD"],"amount":{"min":%s,"max":%s}},"note":"%s"}`,
			i, benchText(r, 30), benchText(r, 12), benchText(r, 60), benchText(r, 60), r.IntN(100), f(), f(), f(), benchText(r, 560))
	default: // ToolResult
		var rows []string
		for j := range 6 {
			rows = append(rows, fmt.Sprintf(`{"id":"r%d-%d","price":%s,"score":%s,"title":"%s","ok":%v,"meta":null}`,
				i, j, f(), f(), benchText(r, 70), j%2 == 0))
		}
		return fmt.Sprintf(`{"count":%d,"epsilon":0.00001,"large":1234567890123,"negative":-7,"results":[%s],"meta":{"lines":"a\nb\r\nc","nested":{"deep":{"deeper":[1,2.5,null]}}}}`,
			len(rows), strings.Join(rows, ","))
	}
}

// benchTrace generates a completed run of n events: run_start, then model
// and tool calls with their results, then run_end. It is deterministic.
func benchTrace(n int) *Trace {
	r := rand.New(rand.NewPCG(7, uint64(n)))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := &Trace{Manifest: Manifest{RunID: "run_bench", AgentName: "bench-agent", CreatedAt: start, Status: RunCompleted}}
	tr.Events = make([]Event, 0, n)
	add := func(ev Event) string {
		i := len(tr.Events)
		ev.ID, ev.RunID, ev.Step = fmt.Sprintf("evt_%07d", i), tr.RunID, i
		ev.Timestamp = start.Add(time.Duration(i) * 1500 * time.Microsecond)
		ev.Status, ev.ReplayPolicy = StatusOK, PolicyFrozen
		tr.Events = append(tr.Events, ev)
		return ev.ID
	}
	root := add(Event{Type: RunStart, Input: MustParse(`{"task":"benchmark run","n":` + fmt.Sprint(n) + `}`)})
	tr.Events[0].ParentID = ""
	for i := 1; len(tr.Events)+4 <= n-1; i++ {
		req := add(Event{Type: LLMRequest, ParentID: root, Provider: "fakeprov", Model: "fake-model-1", Input: MustParse(benchPayload(r, i, LLMRequest))})
		add(Event{Type: LLMResponse, ParentID: req, Model: "fake-model-1", Output: MustParse(benchPayload(r, i, LLMResponse))})
		call := add(Event{Type: ToolCall, ParentID: root, Name: "lookup_customer", Input: MustParse(benchPayload(r, i, ToolCall))})
		add(Event{Type: ToolResult, ParentID: call, Name: "lookup_customer", Output: MustParse(benchPayload(r, i, ToolResult))})
	}
	for len(tr.Events) < n-1 {
		add(Event{Type: StateChange, ParentID: root, Key: "progress", Before: IntValue(int64(len(tr.Events))), After: IntValue(int64(len(tr.Events) + 1))})
	}
	add(Event{Type: RunEnd, RunStatus: RunCompleted, Output: MustParse(`{"calls":1000,"eps":0.00001,"ratio":0.61}`)})
	return tr
}

// BenchmarkCanonicalHash measures what a payload hash costs: canonicalize
// a ~1 KiB payload (file number style in, repr style out) and SHA-256 it.
// The payloads are as events.jsonl holds them (keys sorted), except in
// unsorted-keys, which is JSON from elsewhere, whose objects get reordered.
// Each checks the hash it computed against the hash of the payload's
// canonical form as a parsed Value gives it, computed once beforehand.
func BenchmarkCanonicalHash(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	types := []EventType{LLMRequest, LLMResponse, ToolCall, ToolResult}
	var unsorted, sorted [][]byte
	var wantSum [][sha256.Size]byte // of payload k's canonical form
	var wantHex []string            // Hash of payload k
	total := 0
	for i := range 64 {
		p := []byte(benchPayload(r, i, types[i%4]))
		unsorted = append(unsorted, p)
		total += len(p)
		// As events.jsonl holds them: keys sorted, floats in Pydantic's
		// style (0.00001, where the hash input says 1e-05).
		v := MustParse(string(p))
		sorted = append(sorted, appendFileForm(nil, v))
		wantSum = append(wantSum, sha256.Sum256([]byte(v.Canonical())))
		wantHex = append(wantHex, Hash(v))
	}
	payloads := sorted
	b.Run("canonicalize", func(b *testing.B) {
		i := 0
		cpuLoop(b, int64(total/len(payloads)), func() {
			k := i % len(payloads)
			out, err := canonicalize(payloads[k])
			if err != nil || sha256.Sum256(out) != wantSum[k] {
				b.Fatalf("payload %d: %v, a hash other than its canonical form's", k, err)
			}
			i++
		})
	})
	b.Run("saved", func(b *testing.B) { // what the decoder does: savedValue, the canonicalizer as fallback
		want := make([][sha256.Size]byte, len(payloads))
		for i, p := range payloads {
			out, err := canonicalize(p)
			if err != nil {
				b.Fatal(err)
			}
			want[i] = sha256.Sum256(out)
		}
		var d eventDecoder
		i := 0
		cpuLoop(b, int64(total/len(payloads)), func() {
			k := i % len(payloads)
			d.c.in, d.c.pos = payloads[k], 0
			canon, _, err := d.canonical()
			if err != nil || d.c.pos != len(payloads[k]) || sha256.Sum256(canon) != want[k] {
				b.Fatalf("payload %d: %v, a hash other than the canonicalizer's", k, err)
			}
			i++
		})
	})
	b.Run("canonicalize/unsorted-keys", func(b *testing.B) { // JSON from elsewhere: objects reordered
		i := 0
		cpuLoop(b, int64(total/len(unsorted)), func() {
			k := i % len(unsorted)
			out, err := canonicalize(unsorted[k])
			if err != nil || sha256.Sum256(out) != wantSum[k] {
				b.Fatalf("payload %d: %v, a hash other than its canonical form's", k, err)
			}
			i++
		})
	})
	b.Run("hashJSON", func(b *testing.B) { // public API: reused buffer, hex result
		i := 0
		cpuLoop(b, int64(total/len(payloads)), func() {
			k := i % len(payloads)
			if h, err := hashJSON(payloads[k]); err != nil || h != wantHex[k] {
				b.Fatalf("payload %d: %v, hash %s, want %s", k, err, h, wantHex[k])
			}
			i++
		})
	})
	b.Run("appendCanonical", func(b *testing.B) { // public API into the caller's buffer
		var buf []byte
		i := 0
		cpuLoop(b, int64(total/len(payloads)), func() {
			k := i % len(payloads)
			out, err := appendCanonical(buf[:0], payloads[k])
			if err != nil || sha256.Sum256(out) != wantSum[k] {
				b.Fatalf("payload %d: %v, a hash other than its canonical form's", k, err)
			}
			buf = out
			i++
		})
	})
	b.Run("reused", func(b *testing.B) { // the decoder's path: scratch buffers reused
		var c canonicalizer
		var buf []byte
		i := 0
		cpuLoop(b, int64(total/len(payloads)), func() {
			k := i % len(payloads)
			out, err := c.run(payloads[k], buf[:0])
			if err != nil || sha256.Sum256(out) != wantSum[k] {
				b.Fatalf("payload %d: %v, a hash other than its canonical form's", k, err)
			}
			buf = out
			i++
		})
	})
}

// processCPU returns the CPU time (user and system) the process has used so
// far, read from /proc/self/stat in clock ticks of 10 ms; ok is false where
// that file does not exist.
func processCPU() (d time.Duration, ok bool) {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// cpuLoop runs op b.N times with b.Loop and also reports throughput per
// second of CPU time used ("cpu-MB/s"), which stays meaningful when other
// processes share the machine and wall-clock MB/s drops.
func cpuLoop(b *testing.B, bytesPerOp int64, op func()) {
	b.Helper()
	b.SetBytes(bytesPerOp)
	b.ReportAllocs()
	start, ok := processCPU()
	n := 0
	for b.Loop() {
		op()
		n++
	}
	if end, ok2 := processCPU(); ok && ok2 && end > start {
		b.ReportMetric(float64(bytesPerOp)*float64(n)/(end-start).Seconds()/1e6, "cpu-MB/s")
	}
}

// peakHeap samples the heap while f runs and returns the largest size seen,
// in bytes, above the heap in use before f started.
func peakHeap(f func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := read()
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if h := read(); h > peak {
				peak = h
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	if h := read(); h > peak {
		peak = h
	}
	if peak < base {
		return 0
	}
	return peak - base
}

// BenchmarkValidateBundle streams a bundle once with every check on:
// strict, payload hashes and file digests. Each report must be clean, have
// read every event and have verified the file digests.
func BenchmarkValidateBundle(b *testing.B) {
	for _, n := range fixtureSizes {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			p := benchBundle(b, n)
			check := func(rep *Report) {
				if !rep.Valid() || len(rep.Issues) > 0 || rep.Events != n ||
					rep.Integrity == nil || rep.Integrity.Status != IntegrityVerified {
					b.Fatalf("generated bundle is not clean: %d events, integrity %v, %v", rep.Events, rep.Integrity, rep.Issues)
				}
			}
			// One untimed run measures the peak heap.
			peak := peakHeap(func() { check(ValidateBundle(context.Background(), p, CheckIntegrity())) })
			cpuLoop(b, eventsSize(b, p), func() { check(ValidateBundle(context.Background(), p, CheckIntegrity())) })
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

// BenchmarkLoad reads a whole bundle into memory. It checks that every
// event was read.
func BenchmarkLoad(b *testing.B) {
	for _, n := range fixtureSizes {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			p := benchBundle(b, n)
			cpuLoop(b, eventsSize(b, p), func() {
				if tr, err := Load(p); err != nil || len(tr.Events) != n {
					b.Fatalf("Load: %v", err)
				}
			})
		})
	}
}

// BenchmarkSave writes a whole bundle (redaction, hashes, encoding, fsync).
// It checks that the last bundle written verifies and that its events.jsonl
// is the one the loaded bundle was read from, byte for byte.
func BenchmarkSave(b *testing.B) {
	for _, n := range benchSizes[:2] {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			src := benchBundle(b, n)
			tr, err := Load(src)
			if err != nil {
				b.Fatal(err)
			}
			dst := filepath.Join(b.TempDir(), "out.sftrace")
			cpuLoop(b, eventsSize(b, src), func() {
				if err := tr.Save(dst, Overwrite()); err != nil {
					b.Fatal(err)
				}
			})
			if res := VerifyIntegrity(dst); res.Status != IntegrityVerified {
				b.Fatalf("the saved bundle does not verify: %v", res.Status)
			}
			sameFile(b, filepath.Join(dst, EventsFile), filepath.Join(src, EventsFile))
		})
	}
}

// sameFile fails b unless the files at got and want hold the same bytes.
func sameFile(b *testing.B, got, want string) {
	b.Helper()
	g, err := os.ReadFile(got)
	if err != nil {
		b.Fatal(err)
	}
	w, err := os.ReadFile(want)
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		b.Fatalf("%s (%d bytes) differs from %s (%d bytes)", got, len(g), want, len(w))
	}
}

// TestReprLiteral guards the float fast path the benchmarks rely on: every
// literal reprLiteral accepts must be exactly what formatting its parsed
// value prints, over fixed edge cases and random literals.
func TestReprLiteral(t *testing.T) {
	t.Parallel()
	check := func(lit string) bool {
		t.Helper()
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil {
			t.Fatalf("bad test literal %q", lit)
		}
		want := string(appendFloatRepr(nil, f))
		got := reprLiteral([]byte(lit))
		if got && want != lit {
			t.Fatalf("reprLiteral(%q) = true, but repr is %q", lit, want)
		}
		return got
	}
	for lit, fast := range map[string]bool{
		"0.0": true, "-0.0": true, "1.0": true, "100.0": true, "0.5": true, "-2.25": true, "0.0001": true,
		"0.61": true, "123456789012345.0": true, "0.123456789012345": true,
		"0.00001": false, "1.50": false, "1e5": false, "1.5E-3": false, "1234567890123456.0": false,
		"9007199254740993.0": false, "0.1234567890123456": false, "0.10": false,
	} {
		if got := check(lit); got != fast {
			t.Errorf("reprLiteral(%q) = %v, want %v", lit, got, fast)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		return string(b)
	}
	accepted := 0
	for range 200_000 {
		ip := digits(1 + r.IntN(17))
		for len(ip) > 1 && ip[0] == '0' {
			ip = ip[1:]
		}
		lit := ip + "." + digits(1+r.IntN(17))
		if r.IntN(2) == 0 {
			lit = "0." + strings.Repeat("0", r.IntN(6)) + digits(1+r.IntN(16))
		}
		if r.IntN(4) == 0 {
			lit = "-" + lit
		}
		if check(lit) {
			accepted++
		}
	}
	if accepted < 10_000 {
		t.Errorf("only %d random literals took the fast path; the test does not exercise it", accepted)
	}
}
