// Package shapes holds agents written in the concurrent shapes teams write
// (two goroutines then a join, worker pools, nested fan-out, nodes on
// goroutines, pipelines, parallel model calls, identical calls, markers and
// state on goroutines), each with randomized per-call delays, and what a
// one-result change aimed at one goroutine's call must do to each. Tests of
// package sftest run every shape under many schedules: record with one
// timing, replay and fork with others, and compare the texts.
//
// Its fakes behave like real providers: the model mints a fresh response
// id and fresh tool-call ids on every call and asks for tool calls that run
// in parallel; tools run on goroutines and write state there.
//
// It is test support: nothing outside this module's tests uses it.
package shapes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// Delays draws the random per-call delays of a run: up to Max before each
// call an agent makes (so goroutines arrive in another order on every run,
// replays included, whose served calls return at once) and, for the tools
// and models that run, up to Max inside them. A zero Delays never sleeps.
//
// Reverse makes a shape whose goroutines take turns take them in the other
// order: record with one, replay with the other.
type Delays struct {
	Max     time.Duration
	Reverse bool
}

// Wait sleeps a random duration up to d.Max (and at least yields).
func (d Delays) Wait() {
	if d.Max <= 0 {
		return
	}
	if n := rand.Int64N(int64(d.Max) + 1); n > int64(d.Max)/8 {
		time.Sleep(time.Duration(n))
		return
	}
	for range 1 + rand.IntN(4) {
		// A short wait: yield instead, so that -race runs stay fast.
		time.Sleep(0)
	}
}

// Shape is one concurrent agent and the change a test aims at one of its
// goroutines' calls.
type Shape struct {
	Name  string
	Input any
	// Agent is the agent, its calls delayed by d.
	Agent func(d Delays) replay.Agent
	// Target finds, in a recording of the shape, the recorded call a
	// one-result change aims at (its event id), whether it is a model
	// call, and the output to substitute.
	Target func(tr *trace.Trace) (id string, model bool, output any, err error)
	// Allow names the tools that run for real after the change (those
	// whose input the changed result changes).
	Allow []string
	// Check says whether a variant's output is the base's output with that
	// call's result, and only it, changed.
	Check func(base, variant trace.Value) error
	// Limit, when not empty, says what the shape shows that the
	// concurrency model cannot decide (see the package doc of replay).
	Limit string
	// OrderVaries says that two recordings of the shape may be written in
	// other orders (the scope's own goroutine works while its goroutines
	// do): its texts are not compared across recordings.
	OrderVaries bool
	// RandomData says that what the shape records differs between
	// recordings in values that are no behavior step (a side effect drawn
	// at random): texts that show every marker's value (pages) are not
	// compared across recordings.
	RandomData bool
}

// All returns every shape.
func All() []Shape {
	return []Shape{join(), markers(), pool(), nested(), nodes(), pipeline(), models(), identical(), background(), deep(), tickets(),
		failures(), turns()}
}

// ---- helpers ----

// callOf finds the call event of tool or model label whose input holds
// every string of want.
func callOf(tr *trace.Trace, label string, want ...string) (string, error) {
	for _, c := range tr.Calls() {
		if c.Label != label {
			continue
		}
		in := tr.Events[c.Event].Input.Canonical()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(in, w)
		}
		if ok {
			return tr.Events[c.Event].ID, nil
		}
	}
	return "", fmt.Errorf("no call of '%s' with %q in the recording", label, want)
}

// decode decodes a run's output into a T.
func decode[T any](v trace.Value) (T, error) {
	var out T
	err := v.Decode(&out)
	return out, err
}

// changedOnly compares two maps and says whether exactly key differs, and
// to want.
func changedOnly[V comparable](base, variant map[string]V, key string, want V) error {
	if len(base) != len(variant) {
		return fmt.Errorf("the variant has %d entries, the base %d", len(variant), len(base))
	}
	for k, b := range base {
		v, ok := variant[k]
		switch {
		case !ok:
			return fmt.Errorf("the variant lost %q", k)
		case k == key && v != want:
			return fmt.Errorf("%q is %v, want %v", k, v, want)
		case k != key && v != b:
			return fmt.Errorf("%q changed from %v to %v, but the change aimed at %q only", k, b, v, key)
		}
	}
	return nil
}

// ---- 1. two goroutines, then a join (the reproduction) ----

func join() Shape {
	return Shape{
		Name:  "join",
		Input: "x",
		Agent: func(d Delays) replay.Agent {
			a := replay.Tool("tool_a", func(ctx context.Context, s string) (string, error) { d.Wait(); return "A" + s, nil })
			b := replay.Tool("tool_b", func(ctx context.Context, s string) (string, error) { d.Wait(); return "B" + s, nil })
			return replay.Typed(func(ctx context.Context, in string) (string, error) {
				var wg sync.WaitGroup
				var ra, rb string
				var ea, eb error
				wg.Go(func() { d.Wait(); ra, ea = a(ctx, in) })
				wg.Go(func() {
					d.Wait()
					if rb, eb = b(ctx, in); eb == nil {
						eb = replay.Set(ctx, "b_done", true)
					}
				})
				wg.Wait()
				return ra + rb, errors.Join(ea, eb)
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			id, err := callOf(tr, "tool_b")
			return id, false, "Bchanged", err
		},
		Check: func(base, variant trace.Value) error {
			if got, _ := variant.Str(); got != "AxBchanged" {
				return fmt.Errorf("output %s, want \"AxBchanged\"", variant)
			}
			return nil
		},
	}
}

// ---- 2. markers and state on goroutines ----

var routes = map[string]string{"t1": "standard", "t2": "express", "t3": "standard"}

func markers() Shape {
	return Shape{
		Name:  "markers",
		Input: []string{"t1", "t2", "t3"},
		Agent: func(d Delays) replay.Agent {
			ship := replay.Tool("ship", func(ctx context.Context, in map[string]string) (string, error) {
				d.Wait()
				return in["task"] + " via " + in["route"], nil
			})
			return replay.Typed(func(ctx context.Context, tasks []string) (map[string]string, error) {
				var mu sync.Mutex
				out := map[string]string{}
				errs := make([]error, len(tasks))
				var wg sync.WaitGroup
				for i, task := range tasks {
					wg.Go(func() {
						d.Wait()
						// Nondeterminism read first, before anything tells the
						// goroutines apart: its values do not flow into the
						// calls (see Limit).
						_ = replay.NewID(ctx)
						_, _ = replay.SideEffect(ctx, "shard", func() (int, error) { return rand.IntN(8), nil })
						_ = replay.Now(ctx)
						route := replay.Decide(ctx, "route", routes[task])
						d.Wait()
						res, err := ship(ctx, map[string]string{"task": task, "route": route})
						if err != nil {
							errs[i] = err
							return
						}
						errs[i] = replay.Set(ctx, "shipped:"+task, res)
						mu.Lock()
						out[task] = res
						mu.Unlock()
					})
				}
				wg.Wait()
				return out, errors.Join(errs...)
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			id, err := callOf(tr, "ship", `"t2"`)
			return id, false, "t2 lost", err
		},
		Check: func(base, variant trace.Value) error {
			b, err := decode[map[string]string](base)
			if err != nil {
				return err
			}
			v, err := decode[map[string]string](variant)
			if err != nil {
				return err
			}
			return changedOnly(b, v, "t2", "t2 lost")
		},
		RandomData: true,
		Limit:      "the id, time and shard each goroutine reads before its decision are served from the recording in the order the goroutines arrive: nothing tells them apart yet, so they must not flow into what identifies the goroutine's later calls",
	}
}

// ---- 3. a worker pool: which worker takes which task differs ----

var poolTasks = []string{"refund-4", "audit-9", "refund-7", "audit-2", "ship-5", "ship-1"}

func pool() Shape {
	return Shape{
		Name:  "pool",
		Input: poolTasks,
		Agent: func(d Delays) replay.Agent {
			process := replay.Tool("process", func(ctx context.Context, task string) (map[string]string, error) {
				d.Wait()
				kind, _, _ := strings.Cut(task, "-")
				return map[string]string{"label": kind + ":" + task, "task": task}, nil
			})
			return replay.Typed(func(ctx context.Context, tasks []string) (map[string]map[string]string, error) {
				jobs := make(chan string)
				var mu sync.Mutex
				out := map[string]map[string]string{}
				var errs []error
				var wg sync.WaitGroup
				for range 3 {
					wg.Go(func() {
						for task := range jobs {
							d.Wait()
							res, err := process(ctx, task)
							if err == nil {
								err = replay.Set(ctx, "done:"+task, res["label"])
							}
							mu.Lock()
							if err != nil {
								errs = append(errs, err)
							} else {
								out[task] = res
							}
							mu.Unlock()
						}
					})
				}
				for _, t := range tasks {
					jobs <- t
				}
				close(jobs)
				wg.Wait()
				return out, errors.Join(errs...)
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			id, err := callOf(tr, "process", `"audit-9"`)
			return id, false, map[string]string{"label": "failed:audit-9", "task": "audit-9"}, err
		},
		Check: func(base, variant trace.Value) error {
			b, err := decode[map[string]map[string]string](base)
			if err != nil {
				return err
			}
			v, err := decode[map[string]map[string]string](variant)
			if err != nil {
				return err
			}
			flat := func(m map[string]map[string]string) map[string]string {
				f := map[string]string{}
				for k, r := range m {
					f[k] = r["label"]
				}
				return f
			}
			return changedOnly(flat(b), flat(v), "audit-9", "failed:audit-9")
		},
	}
}

// ---- 4. nested fan-out: goroutines started by goroutines ----

func nested() Shape {
	return Shape{
		Name:  "nested",
		Input: 2,
		Agent: func(d Delays) replay.Agent {
			leaf := replay.Tool("leaf", func(ctx context.Context, in [2]int) (int, error) { d.Wait(); return 10*in[0] + in[1], nil })
			merge := replay.Tool("merge", func(ctx context.Context, in []int) (int, error) {
				d.Wait()
				s := 0
				for _, v := range in {
					s += v
				}
				return s, nil
			})
			return replay.Typed(func(ctx context.Context, n int) ([]int, error) {
				sums := make([]int, n)
				errs := make([]error, n)
				var outer sync.WaitGroup
				for g := range n {
					outer.Go(func() {
						d.Wait()
						leaves := make([]int, 3)
						lerr := make([]error, 3)
						var inner sync.WaitGroup
						for i := range 3 {
							inner.Go(func() { d.Wait(); leaves[i], lerr[i] = leaf(ctx, [2]int{g + 1, i}) })
						}
						inner.Wait()
						if err := errors.Join(lerr...); err != nil {
							errs[g] = err
							return
						}
						d.Wait()
						sums[g], errs[g] = merge(ctx, leaves)
					})
				}
				outer.Wait()
				return sums, errors.Join(errs...)
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			id, err := callOf(tr, "leaf", "[2,1]")
			return id, false, 100, err
		},
		Allow: []string{"merge"},
		Check: func(base, variant trace.Value) error {
			b, err := decode[[]int](base)
			if err != nil {
				return err
			}
			v, err := decode[[]int](variant)
			if err != nil {
				return err
			}
			// leaf [2,1] returned 21; merge of group 2 adds 100 instead.
			want := slices.Clone(b)
			want[1] += 100 - 21
			if !slices.Equal(v, want) {
				return fmt.Errorf("sums %v, want %v", v, want)
			}
			return nil
		},
	}
}

// ---- 5. nodes opened on goroutines ----

func nodes() Shape {
	return Shape{
		Name:  "nodes",
		Input: 4,
		Agent: func(d Delays) replay.Agent {
			fetch := replay.Tool("fetch", func(ctx context.Context, i int) (string, error) { d.Wait(); return fmt.Sprintf("page %d", i), nil })
			model := FakeModel(d)
			return replay.Typed(func(ctx context.Context, n int) ([]string, error) {
				out := make([]string, n)
				errs := make([]error, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						d.Wait()
						errs[i] = replay.Node(ctx, "worker", func(ctx context.Context) error {
							page, err := fetch(ctx, i)
							if err != nil {
								return err
							}
							d.Wait()
							resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "m",
								Messages: []replay.Message{{Role: "user", Content: "summarize: " + page}}}, model)
							out[i] = resp.Content
							return err
						})
					})
				}
				wg.Wait()
				return out, errors.Join(errs...)
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			id, err := callOf(tr, "fake/m", "page 2")
			return id, true, replay.Response{Content: "changed summary", StopReason: "stop"}, err
		},
		Check: func(base, variant trace.Value) error {
			b, err := decode[[]string](base)
			if err != nil {
				return err
			}
			v, err := decode[[]string](variant)
			if err != nil {
				return err
			}
			want := slices.Clone(b)
			want[2] = "changed summary"
			if !slices.Equal(v, want) {
				return fmt.Errorf("summaries %q, want %q", v, want)
			}
			return nil
		},
	}
}

// ---- 6. a pipeline of stages connected by channels ----

func pipeline() Shape {
	return Shape{
		Name:  "pipeline",
		Input: 4,
		Agent: func(d Delays) replay.Agent {
			parse := replay.Tool("parse", func(ctx context.Context, i int) (string, error) { d.Wait(); return fmt.Sprintf("doc%d", i), nil })
			enrich := replay.Tool("enrich", func(ctx context.Context, s string) (string, error) { d.Wait(); return s + "+meta", nil })
			report := replay.Tool("report", func(ctx context.Context, s []string) (string, error) { return strings.Join(s, ","), nil })
			return replay.Typed(func(ctx context.Context, n int) (string, error) {
				parsed := make(chan string)
				enriched := make(chan string)
				var errMu sync.Mutex
				var errs []error
				fail := func(err error) {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
				}
				go func() {
					defer close(parsed)
					for i := range n {
						d.Wait()
						p, err := parse(ctx, i)
						if err != nil {
							fail(err)
							continue
						}
						parsed <- p
					}
				}()
				go func() {
					defer close(enriched)
					for p := range parsed {
						d.Wait()
						e, err := enrich(ctx, p)
						if err != nil {
							fail(err)
							continue
						}
						enriched <- e
					}
				}()
				var all []string
				for e := range enriched {
					all = append(all, e)
				}
				if err := errors.Join(errs...); err != nil {
					return "", err
				}
				sort.Strings(all)
				return report(ctx, all)
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			id, err := callOf(tr, "enrich", "doc2")
			return id, false, "doc2+changed", err
		},
		Allow: []string{"report"},
		Check: func(base, variant trace.Value) error {
			b, _ := base.Str()
			v, _ := variant.Str()
			if want := strings.Replace(b, "doc2+meta", "doc2+changed", 1); v != want {
				return fmt.Errorf("report %q, want %q", v, want)
			}
			return nil
		},
	}
}

// ---- 7. model calls in parallel, then one that sees every answer ----

// responseID mints a response id, as a provider does, and reports it to
// the session (replay.ReportIDs), as an adapter that keeps the provider's
// id in Extra must: so a live tail's ids are bound to the recorded ones and
// renderings show them as placeholders.
func responseID(ctx context.Context) string {
	id := "chatcmpl-" + uuid.NewString()
	replay.ReportIDs(ctx, "response", id)
	return id
}

// FakeModel is a chat model that behaves like a real provider: every
// response has a fresh id (a UUID, as some providers mint them), and a
// question asked with tools is answered with parallel tool calls, each with
// a fresh id. Its answer to anything else is a function of the last
// message, so the same request gets the same text.
func FakeModel(d Delays) func(context.Context, replay.Request) (replay.Response, error) {
	return func(ctx context.Context, r replay.Request) (replay.Response, error) {
		d.Wait()
		last := r.Messages[len(r.Messages)-1]
		resp := replay.Response{Model: "m-2026", StopReason: "stop",
			Extra: map[string]any{"id": responseID(ctx)},
			Usage: replay.Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17}}
		if len(r.Tools) > 0 && last.Role == "user" {
			resp.StopReason = "tool_calls"
			for _, t := range r.Tools {
				resp.ToolCalls = append(resp.ToolCalls, replay.ToolCall{ID: "call-" + uuid.NewString(), Name: t.Name,
					Arguments: json.RawMessage(`{"q":` + fmt.Sprintf("%q", last.Content) + `}`)})
			}
			return resp, nil
		}
		resp.Content = "answer to " + last.Content
		return resp, nil
	}
}

func models() Shape {
	questions := []string{"q1", "q2", "q3"}
	return Shape{
		Name:  "models",
		Input: questions,
		Agent: func(d Delays) replay.Agent {
			model := FakeModel(d)
			ask := func(ctx context.Context, msgs []replay.Message) (replay.Response, error) {
				return replay.LLM(ctx, replay.Request{Provider: "fake", Model: "m", Messages: msgs}, model)
			}
			return replay.Typed(func(ctx context.Context, qs []string) (string, error) {
				answers := make([]string, len(qs))
				errs := make([]error, len(qs))
				var wg sync.WaitGroup
				for i, q := range qs {
					wg.Go(func() {
						d.Wait()
						resp, err := ask(ctx, []replay.Message{{Role: "user", Content: q}})
						answers[i], errs[i] = resp.Content, err
					})
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					return "", err
				}
				final, err := ask(ctx, []replay.Message{{Role: "user", Content: "combine: " + strings.Join(answers, " | ")}})
				return final.Content, err
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			id, err := callOf(tr, "fake/m", `"content":"q2"`)
			return id, true, replay.Response{Content: "changed", StopReason: "stop"}, err
		},
		Check: func(base, variant trace.Value) error {
			v, _ := variant.Str()
			if want := "answer to combine: answer to q1 | changed | answer to q3"; v != want {
				return fmt.Errorf("final answer %q, want %q", v, want)
			}
			return nil
		},
	}
}

// ---- 8. identical calls with different results on two goroutines ----

func identical() Shape {
	return Shape{
		Name:  "identical",
		Input: 2,
		Agent: func(d Delays) replay.Agent {
			var counter atomic.Int64
			next := replay.Tool("next", func(ctx context.Context, _ struct{}) (int64, error) { d.Wait(); return counter.Add(1), nil })
			return replay.Typed(func(ctx context.Context, n int) ([]int64, error) {
				counter.Store(0)
				out := make([]int64, n)
				errs := make([]error, n)
				// The last goroutine calls first, the others after the one
				// above them got its answer (the first first with Reverse):
				// while it runs for real, goroutine i gets n-i on every run,
				// whatever else the schedule does; a replay with Reverse
				// makes the calls arrive in the other order.
				turn := make([]chan struct{}, n+1)
				for i := range turn {
					turn[i] = make(chan struct{})
				}
				close(turn[n])
				var wg sync.WaitGroup
				for i := range n {
					me, after := i, i+1
					if d.Reverse {
						me, after = n-1-i, n-i
					}
					wg.Go(func() {
						defer close(turn[me])
						d.Wait()
						// What tells the goroutines apart before their
						// identical calls: each writes its own key.
						if errs[i] = replay.Set(ctx, fmt.Sprintf("worker:%d", i), "started"); errs[i] != nil {
							return
						}
						d.Wait()
						<-turn[after]
						out[i], errs[i] = next(ctx, struct{}{})
					})
				}
				wg.Wait()
				return out, errors.Join(errs...)
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			for _, c := range tr.Calls() {
				if n, _ := c.Output.Int(); c.Label == "next" && n == 2 {
					return tr.Events[c.Event].ID, false, 42, nil
				}
			}
			return "", false, nil, errors.New("no call of 'next' returned 2")
		},
		Check: func(base, variant trace.Value) error {
			b, err := decode[[]int64](base)
			if err != nil {
				return err
			}
			v, err := decode[[]int64](variant)
			if err != nil {
				return err
			}
			want := slices.Clone(b)
			for i := range want {
				if want[i] == 2 {
					want[i] = 42
				}
			}
			if !slices.Equal(v, want) {
				return fmt.Errorf("results %v, want %v (the goroutine that was served 2 gets 42, the other its own 1)", v, want)
			}
			return nil
		},
	}
}

// ---- 9. the scope's own goroutine works while a goroutine does ----

func background() Shape {
	return Shape{
		Name:  "background",
		Input: "q",
		Agent: func(d Delays) replay.Agent {
			prefetch := replay.Tool("prefetch", func(ctx context.Context, q string) (string, error) { d.Wait(); return "cached " + q, nil })
			search := replay.Tool("search", func(ctx context.Context, q string) (string, error) { d.Wait(); return "found " + q, nil })
			answer := replay.Tool("answer", func(ctx context.Context, in []string) (string, error) { return strings.Join(in, " + "), nil })
			return replay.Typed(func(ctx context.Context, q string) (string, error) {
				var pre string
				var perr error
				var wg sync.WaitGroup
				wg.Go(func() {
					d.Wait()
					if pre, perr = prefetch(ctx, q); perr == nil {
						perr = replay.Set(ctx, "prefetched", q)
					}
				})
				d.Wait()
				found, err := search(ctx, q) // meanwhile, on the run's own goroutine
				wg.Wait()
				if err = errors.Join(err, perr); err != nil {
					return "", err
				}
				return answer(ctx, []string{pre, found})
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			id, err := callOf(tr, "prefetch")
			return id, false, "stale", err
		},
		Allow: []string{"answer"},
		Check: func(base, variant trace.Value) error {
			if got, _ := variant.Str(); got != "stale + found q" {
				return fmt.Errorf("answer %s, want \"stale + found q\"", variant)
			}
			return nil
		},
		OrderVaries: true,
	}
}

// ---- 10. nodes on goroutines holding goroutines of their own ----

func deep() Shape {
	return Shape{
		Name:  "deep",
		Input: []string{"eu", "us"},
		Agent: func(d Delays) replay.Agent {
			price := replay.Tool("price", func(ctx context.Context, in [2]string) (int, error) {
				d.Wait()
				return len(in[0])*10 + len(in[1]), nil
			})
			return replay.Typed(func(ctx context.Context, regions []string) (map[string]int, error) {
				var mu sync.Mutex
				out := map[string]int{}
				errs := make([]error, len(regions))
				var wg sync.WaitGroup
				for i, region := range regions {
					wg.Go(func() {
						d.Wait()
						errs[i] = replay.Node(ctx, "region", func(ctx context.Context) error {
							if replay.Decide(ctx, "currency", map[string]string{"eu": "EUR", "us": "USD"}[region]) == "" {
								return errors.New("no currency")
							}
							items := []string{"a", "bb", "ccc"}
							prices := make([]int, len(items))
							perr := make([]error, len(items))
							var inner sync.WaitGroup
							for k, item := range items {
								inner.Go(func() {
									d.Wait()
									prices[k], perr[k] = price(ctx, [2]string{region, item})
									if perr[k] == nil {
										_ = replay.NewID(ctx) // read after the call: its goroutine's history says which
									}
								})
							}
							inner.Wait()
							total := 0
							for _, p := range prices {
								total += p
							}
							mu.Lock()
							out[region] = total
							mu.Unlock()
							if err := errors.Join(perr...); err != nil {
								return err
							}
							return replay.Set(ctx, "total:"+region, total)
						})
					})
				}
				wg.Wait()
				return out, errors.Join(errs...)
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			id, err := callOf(tr, "price", `["us","bb"]`)
			return id, false, 1000, err
		},
		Check: func(base, variant trace.Value) error {
			b, err := decode[map[string]int](base)
			if err != nil {
				return err
			}
			v, err := decode[map[string]int](variant)
			if err != nil {
				return err
			}
			return changedOnly(b, v, "us", b["us"]-22+1000)
		},
	}
}

// ---- 11. a worker pool whose tasks read ids and times after their call ----

func tickets() Shape {
	return Shape{
		Name:  "tickets",
		Input: []string{"t-1", "t-2", "t-3", "t-4", "t-5"},
		Agent: func(d Delays) replay.Agent {
			classify := replay.Tool("classify", func(ctx context.Context, t string) (string, error) {
				d.Wait()
				return map[bool]string{true: "urgent", false: "normal"}[t == "t-3" || t == "t-5"], nil
			})
			file := replay.Tool("file", func(ctx context.Context, in map[string]string) (string, error) {
				d.Wait()
				return in["ticket"] + ":" + in["class"], nil
			})
			return replay.Typed(func(ctx context.Context, ts []string) (map[string]string, error) {
				jobs := make(chan string)
				var mu sync.Mutex
				out := map[string]string{}
				var errs []error
				var wg sync.WaitGroup
				for range 2 {
					wg.Go(func() {
						for t := range jobs {
							d.Wait()
							class, err := classify(ctx, t)
							var ref string
							if err == nil {
								// What the task reads after its call (a reference,
								// a time) flows into its next call.
								id := replay.NewID(ctx)
								at := replay.Now(ctx)
								ref, err = file(ctx, map[string]string{"ticket": t, "class": class, "ref": id, "at": at.Format(time.RFC3339Nano)})
							}
							mu.Lock()
							if err != nil {
								errs = append(errs, err)
							} else {
								out[t] = ref
							}
							mu.Unlock()
						}
					})
				}
				for _, t := range ts {
					jobs <- t
				}
				close(jobs)
				wg.Wait()
				return out, errors.Join(errs...)
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			id, err := callOf(tr, "classify", `"t-2"`)
			return id, false, "urgent", err
		},
		Allow: []string{"file"},
		Check: func(base, variant trace.Value) error {
			b, err := decode[map[string]string](base)
			if err != nil {
				return err
			}
			v, err := decode[map[string]string](variant)
			if err != nil {
				return err
			}
			return changedOnly(b, v, "t-2", "t-2:urgent")
		},
	}
}

// ---- 12. failed calls on goroutines, and nodes whose calls fail ----

func failures() Shape {
	return Shape{
		Name:  "failures",
		Input: []string{"ok-1", "bad-2", "ok-3"},
		Agent: func(d Delays) replay.Agent {
			check := replay.Tool("check", func(ctx context.Context, s string) (string, error) {
				d.Wait()
				if strings.HasPrefix(s, "bad") {
					return "", fmt.Errorf("check %s: refused", s)
				}
				return "checked " + s, nil
			})
			return replay.Typed(func(ctx context.Context, items []string) ([]string, error) {
				out := make([]string, 2*len(items))
				var wg sync.WaitGroup
				for i, it := range items {
					wg.Go(func() {
						d.Wait()
						// A failed call is data here: the agent reports it and
						// goes on, as a framework hands a tool's error to the
						// model.
						if r, err := check(ctx, it); err != nil {
							out[2*i] = "error: " + err.Error()
						} else {
							out[2*i] = r
						}
					})
					wg.Go(func() {
						d.Wait()
						// A node on a goroutine whose call fails, and which
						// fails with it: the call, its result, its error and
						// the node's end belong together.
						err := replay.Node(ctx, "enrich", func(ctx context.Context) error {
							c, err := check(ctx, it+"/inner")
							if err != nil {
								return fmt.Errorf("enrich: %w", err)
							}
							out[2*i+1] = "rich " + c
							return nil
						})
						if err != nil {
							out[2*i+1] = "error: " + err.Error()
						}
					})
				}
				wg.Wait()
				return out, nil
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			id, err := callOf(tr, "check", `"ok-3/inner"`)
			return id, false, "overridden ok-3", err
		},
		Check: func(base, variant trace.Value) error {
			b, err := decode[[]string](base)
			if err != nil {
				return err
			}
			v, err := decode[[]string](variant)
			if err != nil {
				return err
			}
			want := slices.Clone(b)
			want[5] = "rich overridden ok-3"
			if !slices.Equal(v, want) {
				return fmt.Errorf("results %q, want %q", v, want)
			}
			return nil
		},
	}
}

// ---- 13. turns: a model's tool calls run on goroutines, joined before the next model call ----

// turnModel answers like a provider whose model asks for two tools at once
// on each of two turns (search and weather, then book and notify with what
// the first turn returned), then answers with every tool result it was
// given; every response and tool call has a fresh id.
func turnModel(d Delays) func(context.Context, replay.Request) (replay.Response, error) {
	return func(ctx context.Context, r replay.Request) (replay.Response, error) {
		d.Wait()
		turn := 0
		var results []string
		for _, m := range r.Messages {
			if m.Role == "assistant" && len(m.ToolCalls) > 0 {
				turn++
			}
			if m.Role == "tool" {
				results = append(results, m.Content)
			}
		}
		resp := replay.Response{Model: "m-2026", StopReason: "tool_calls",
			Extra: map[string]any{"id": responseID(ctx)}}
		ask := func(name, q string) {
			resp.ToolCalls = append(resp.ToolCalls, replay.ToolCall{ID: "call-" + uuid.NewString(), Name: name,
				Arguments: json.RawMessage(`{"q":` + fmt.Sprintf("%q", q) + `}`)})
		}
		switch {
		case turn == 0:
			ask("search", r.Messages[0].Content)
			ask("weather", "DEL")
		case turn == 1 && len(results) == 2:
			ask("book", results[0])
			ask("notify", results[1])
		default:
			resp.StopReason = "stop"
			resp.Content = "done: " + strings.Join(results, " | ")
		}
		return resp, nil
	}
}

func turns() Shape {
	return Shape{
		Name:  "turns",
		Input: "KTM-DEL",
		Agent: func(d Delays) replay.Agent {
			model := turnModel(d)
			tools := map[string]func(context.Context, map[string]string) (string, error){}
			for _, name := range []string{"search", "weather", "book", "notify"} {
				tools[name] = replay.Tool(name, func(ctx context.Context, in map[string]string) (string, error) {
					d.Wait()
					return name + "(" + in["q"] + ")", nil
				})
			}
			return replay.Typed(func(ctx context.Context, q string) (string, error) {
				msgs := []replay.Message{{Role: "user", Content: q}}
				for range 4 {
					resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "m", Messages: msgs,
						Tools: []replay.ToolSpec{{Name: "search"}, {Name: "weather"}, {Name: "book"}, {Name: "notify"}}}, model)
					if err != nil {
						return "", err
					}
					if len(resp.ToolCalls) == 0 {
						return resp.Content, nil
					}
					msgs = append(msgs, replay.Message{Role: "assistant", ToolCalls: resp.ToolCalls})
					// Each tool call of the answer on its own goroutine,
					// joined before the model is asked again, as Genkit,
					// Eino and openai-go agents do; the results go back in
					// the order of the calls.
					results := make([]replay.Message, len(resp.ToolCalls))
					var wg sync.WaitGroup
					for i, tc := range resp.ToolCalls {
						wg.Go(func() {
							d.Wait()
							var in map[string]string
							out := ""
							if err := json.Unmarshal(tc.Arguments, &in); err != nil {
								out = "error: " + err.Error()
							} else if tool, ok := tools[tc.Name]; !ok {
								out = "error: no tool " + tc.Name
							} else if out, err = tool(ctx, in); err != nil {
								out = "error: " + err.Error()
							}
							results[i] = replay.Message{Role: "tool", ToolCallID: tc.ID, Content: out}
						})
					}
					wg.Wait()
					msgs = append(msgs, results...)
				}
				return "", errors.New("the model did not answer in four turns")
			})
		},
		Target: func(tr *trace.Trace) (string, bool, any, error) {
			id, err := callOf(tr, "book")
			return id, false, "book(sold out)", err
		},
		Check: func(base, variant trace.Value) error {
			b, _ := base.Str()
			v, _ := variant.Str()
			if want := strings.Replace(b, "book(search(KTM-DEL))", "book(sold out)", 1); v != want || v == b {
				return fmt.Errorf("answer %q, want %q", v, want)
			}
			return nil
		},
	}
}
