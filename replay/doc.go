// Package replay is the runtime agent code calls through: it records a run
// of an agent into a stepfork trace, and later runs the same code against
// that trace, serving the recorded results so that nothing touches the world.
//
// Agent code stays ordinary Go. It reaches tools, models and state through
// wrappers that take the context it was given; with no session in the
// context every wrapper is a plain pass-through. So a wrapper called with a
// context that does not come from the run's (context.Background() inside a
// tool, a goroutine started with a fresh context) runs live and is not
// recorded: while a run is recorded or replayed in the process, each such
// wrapper is reported once as a warning through log/slog's default logger,
// and [StrictContext] makes the calls on the run's goroutines an error
// ([ErrNoSession]).
//
//	search := replay.Tool("search_flights", searchFlights)
//
//	agent := replay.Typed(func(ctx context.Context, in Trip) (Booking, error) {
//		flights, err := search(ctx, SearchInput{From: in.From, To: in.To})
//		if err != nil {
//			return Booking{}, err
//		}
//		resp, err := replay.LLM(ctx, replay.Request{Provider: "openai", Model: "gpt-4o",
//			Messages: []replay.Message{{Role: "user", Content: flights.Summary()}}}, client.Call)
//		…
//	})
//
//	rec, err := replay.Record(ctx, "booking", Trip{From: "KTM", To: "DEL"}, agent,
//		replay.SaveTo("testdata/booking.sftrace"))
//	// err: the recording failed; rec.Err: the agent's own error
//
//	tr, err := trace.Load("testdata/booking.sftrace")
//	res, err := replay.Replay(ctx, tr, agent) // frozen: zero tool or model executions
//
// [Record] takes [RecordOption]s and [Replay] takes [ReplayOption]s; an
// option that means nothing to an entry point ([Hybrid] for Record, say) does
// not compile there. [SaveTo] is an option of both. The replay plan of a
// trace is computed once and shared by every replay of it; [Prepare] returns
// it, for [Prepared.Replay].
//
// # Wrappers
//
//   - [Tool](name, fn) returns a function with fn's signature; its calls are
//     tool_call / tool_result events (a failure: a tool_result with status
//     error and an error event under it).
//   - [LLM](ctx, req, call) records a provider-neutral [Request] and
//     [Response]; [LLMRaw](ctx, provider, model, body, call) does the same
//     for raw JSON bodies (the form provider-specific requests and the HTTP
//     transport use). [ReportUsage] adds token counts and cost from inside a
//     call, [ReportIDs] the ids the provider minted in its response.
//   - [Node](ctx, name, fn) runs a named phase, between @node enter and exit
//     markers; everything inside hangs under the enter marker.
//   - [Set](ctx, key, value) records a state write (state_change with the
//     key's previous value in this run, or null); [Read](ctx, key, current)
//     is where a fork may patch state the agent reads.
//   - [Decide](ctx, name, computed) records a decision (@decision, kind
//     decision); [Approve](ctx, name, ask) a human approval (@decision, kind
//     approval); [Param](ctx, name, def) a knob (@param); a fork may force
//     any of them.
//   - [Now](ctx) (@now), [NewID](ctx) (@id) and [SideEffect](ctx, name, fn)
//     (@effect, Temporal's SideEffect) record nondeterminism once and serve
//     it on replay.
//
// # Events and markers
//
// Traces are stepfork v0.1 bundles (package trace). Every event gets the
// next step and, as parent, the innermost enclosing event: run_start at top
// level, the tool_call or llm_request whose body is running, or the @node
// enter marker of the current node. Results and failures hang under their
// call, as stepfork's recorder writes them; a failed run ends with a
// run-level error event under run_start, the failure in the manifest, and a
// run_end with parent null. A failure's error_type is the ErrorType() of
// the first error of its chain that has that method, else the innermost
// type of the chain that names something ("booking.TimeoutError",
// "syscall.Errno"), written as %T writes it without a leading '*'; an error
// made only of errors.New, fmt.Errorf and errors.Join is of type "error".
// Nodes, decisions, parameters and nondeterminism
// are runtime markers: state_change events with reserved keys, whose
// payloads are listed at [trace.MarkerNode].
//
// Everything is redacted (package trace's rules, [trace.RedactValue]) as it
// is appended, before it is kept in memory or written; error messages of this
// package only quote redacted values. A run id or an agent name that holds
// a credential is refused before the run starts ([ErrInvalidOptions]): both
// are written where nothing can be redacted.
//
// # Scrubbers
//
// What the library cannot know is secret (a customer's e-mail address, an
// account number, the text of a ticket) is removed by scrubbers
// ([trace.Scrubber]) installed once, as [Scrubbers]: an option of [Record]
// and [Replay], an option of [Transport] (for every session its requests
// run in), or [Sampler.Scrub]. They run with the guarantee of redaction:
// after the credential patterns, on every payload string and key, name,
// message and error type a session records, on every live value it
// compares with the recording or quotes in an error, before anything is
// hashed, saved or printed; redactions.json lists what they changed with
// the reason "scrubber". Replay a run with the scrubbers it was recorded
// with: a live value is compared with the recording as it was scrubbed.
//
// # Replay and matching
//
// A replay matches every operation the agent makes (a tool or model call,
// a node, a decision, parameter, approval, time, id or side effect, a state
// write) with the recorded one it stands for. What one goroutine did is
// ordered; what several goroutines did is matched as a set (see Concurrent
// work below); a run made on one goroutine, and every bundle without lanes
// (Python stepfork's), is matched in order, as stepfork's replay does.
//
// Tool and model calls made in order are matched with one strict cursor
// over the recorded calls (every tool_call and llm_request of the base, in
// file order, less those nested under a served call, whose body does not
// run, and those of concurrent groups). For each call the agent makes it
// checks, in this order: the kind; the tool name, or the model and
// provider; that the recorded input still has its stored hash; that the
// redacted live input is canonically equal to the recorded input; the
// recorded call's replay policy (forbidden and manual refuse); that a
// result was captured; that the recorded output still has its stored hash;
// and, in [ModeLive], that the tool is allowed ([Live]), refused before the
// body runs and before the cursor advances. Null is hashed like any other
// value. A recorded failure is served as a [*RecordedError]. The errors
// carry stepfork's texts, followed by a report naming the recorded event
// and step and, for a changed input, its cmp.Diff (-recorded +actual).
// "call #N" names the recorded call: in a bundle with lanes its position
// among the base's calls, whatever order goroutines reached it in.
//
// Markers made in order are served from their own cursors, by kind and
// name, in order: [Param], [Now], [NewID], [SideEffect] and [Approve]
// return the recorded value; [Decide] checks that the computed value
// equals the recorded one. A marker the recording does not have, or a
// decision that differs, is a divergence too. State writes are not checked:
// they are re-recorded, and a difference shows in the diff of the replay's
// trace against the base. Nodes are not checked either.
//
// The first divergence is kept in [Result.Divergence] even when the agent
// swallows the error.
//
// # Matching you decide
//
// Inputs are compared canonically. [Match] adds user matchers ([Matcher]:
// [IgnoreFields], [IgnoreTimestamps], [SortList], [Normalize], [MatchFunc],
// for every call or narrowed to a tool or a model): a live input that
// differs from the recorded one only in what they accept is matched with
// it, at the cursor, in concurrent groups and for a Director, and the
// call reports the matchers it matched through ([CallRecord.MatchedBy]).
// The new trace records the input the agent sent.
//
// # Concurrent work
//
// A recording notes which goroutine made each operation, relative to the
// scope it was made in (the run, a node, or a call whose body ran): lane 0
// for the goroutine that opened the scope, 1, 2, … for the others
// ([trace.EventLane], kept in the bundle's [trace.LanesFile]). What the
// other goroutines did, and everything inside it, is the scope's
// concurrent group: its order is an accident of scheduling. Groups are
// keyed by scope path, so the goroutines of every node of one name in one
// place (a worker node run on each goroutine) form one group.
//
// Replay matches an operation of a group with a pending recorded operation
// of the same group by its identity: its kind and name, and the input that
// identifies it where it has one (a call's input; a decision's value; a
// parameter's default; a state write's key and value). A time, an id, a
// side effect, an approval and an entered node identify nothing: they are
// told apart by what their goroutine did before. Among the candidates the
// matcher prefers, in this order: the recorded operation that follows, in
// its recorded lane, the one the goroutine matched last in that scope (for
// the goroutine that opened the scope, the first operation inside the
// scope's recorded counterpart); another operation of that lane; one that
// is ready (first of its lane, or its lane's previous operation matched)
// and that no other goroutine is expected to make next; then the earliest.
// So a worker pool whose workers take other tasks than when it was recorded
// is matched task by task; two identical calls with different recorded
// results are told apart by what each goroutine did before them; and an id
// read after a goroutine's call is the id read after that call. A call that
// matches no pending call of its group fails, listing the group's pending
// calls and the closest one with where its input differs; a decision whose
// value matches none is compared with the closest of its name.
//
// What cannot be told apart is served in the order the goroutines arrive:
// operations that identify nothing, made by goroutines that have done
// nothing identifying yet (say each goroutine reads an id before its first
// call), get the recorded values of the lanes in that order. Their values
// must not flow into what identifies the goroutine later, or the
// goroutines must be told apart first (a call, a decision or a state write
// that names the goroutine's task).
//
// An operation of a scope's own goroutine made once everything the scope's
// other goroutines had done in it was over (their results recorded, their
// nodes exited) is a join, kept in the bundle's [trace.JoinsFile]: an agent
// that runs the tool calls of a model's answer on goroutines and waits for
// them before it asks the model again joins at each model call. A join
// splits its scope's group into parts ([trace.EventLane.Part]): a fork may
// start at a join (between two turns of tools), and the diff pairs a
// member within its part first. A replay writes its base's joins, whatever
// the schedule.
//
// A node on a goroutine is matched when it is entered, by name and history,
// and settled when the run ends by what it holds. Bundles without lanes
// for markers and state writes (written before they had them) keep matching
// those in order; bundles without any lanes use the strict cursor for
// everything.
//
// # Which code made a run
//
// Every run a session records (Record, a replay's own trace, a fork's
// variant, a [Sampler]'s run) carries a [trace.BuildFile] saying which code
// made it: the module of the agent function, its version and VCS revision
// from [runtime/debug.ReadBuildInfo] (for a test binary, which go test
// does not stamp, the revision of the repository's HEAD). [Build] sets it
// explicitly for binaries built without it.
//
// # The replay's own trace
//
// Every replay records a complete new trace ([Result.Trace]): served results
// as if they had happened, live calls as they happened. A session whose
// operations were made on several goroutines writes its trace in one
// canonical order, a function of what happened and not of when: every event
// is followed by the events under it; under a scope, what its own goroutine
// did keeps its order, and what other goroutines did is cut into segments
// (an operation that identifies itself, with the approvals, times, ids and
// side effects its goroutine read right after it), each placed after the
// operations of the scope's own goroutine that were over before it began,
// and ordered,
// in a replay, as the base operations they stand for, otherwise by their
// content (decisions and parameters, then calls and nodes, then state
// writes; by name, identifying input and what they hold, with ids and
// times blanked out). Steps are numbered in that order, lanes by first
// appearance in each scope, and each state write's "before" is what the key
// held before it in that order. So a null replay's trace is its base's and
// two recordings of the same behaviour are written alike, whatever the
// schedule. What no order can tell: when a goroutine begins while an
// operation of its scope's own goroutine runs in one run and after it in
// another, its segment is placed as it happened. A [Director] that reports
// steps maps them with [Result.DirectedStep].
//
// While each event (in that order) equals the base event at the same
// position, the base's event id is reused; so the frozen replay of an
// unchanged agent has the base's events, ids, payloads and parents (only
// the run id, timestamps and durations are new), and a fork's unchanged
// prefix keeps the base's ids. A served failure's
// error text is the recorded message, so the agent sees (and the new trace
// records) what it saw when the run was recorded.
//
// # Directors
//
// A [Director] ([WithDirector]) is consulted for every intercepted call with
// a [*Call] describing it (kind, name, input, position, occurrence, parent,
// node, the recorded call strict matching would use and an unconsumed
// recorded call with the same input, each as its concurrent group matches
// it) and answers with an [Action]: [Strict], [Serve] a value (in place of
// a recorded call with [Action.Instead]), [ServeMatch] the equal recorded
// call, [Execute] live (optionally with a patched input or model), [Block],
// or [Fail]. Package fork builds counterfactual runs on it.
//
// # Observers
//
// An Observer installed in the context (WithObserver) is told of every run a
// session starts with that context and of every dependency call as the
// session answers it: its outcome (executed, served, blocked, failed), its
// error, and the usage an executed model call reported. The agent and each
// executed body run in the contexts the Observer returns, so spans nest as
// calls do; package fork's runs are sessions like any other, flagged as
// directed. It is how tracing and metrics (contrib/otel) see runs live.
//
// # HTTP model calls
//
// [Transport](base) is an [http.RoundTripper] that records and serves the
// model calls an agent makes over HTTP (OpenAI chat completions and
// Responses, Anthropic messages, Gemini generateContent; JSON bodies, and
// server-sent event streams frame by frame, a broken stream breaking the
// same way on replay), so that an agent built on an official SDK is recorded
// by handing the SDK an [http.Client] that uses it:
//
//	client := openai.NewClient(option.WithHTTPClient(&http.Client{Transport: replay.Transport(nil)}))
//
// The request body is the llm_request input, the response (status, a few
// harmless headers, body or frames) and the message it says the
// llm_response output; no request header is recorded, so API keys never
// reach a trace. The message, not the raw response, is the call's
// behaviour (its usage is cost, not behaviour); ids the provider mints are
// bound to the recorded ones they stand for; [Prices] gives calls a cost.
// Other requests are recorded as "http" tool calls, so a frozen replay
// sends nothing. See [Transport] for the recorded shape and the errors
// served back.
//
// # Provider-minted ids
//
// Providers mint ids on every call (response ids, tool-call ids) that the
// agent sends back, so a live call never answers with the recorded ones.
// [ReportIDs] is the seam through which a model call says which values of
// its response are such ids; [Transport], [LLM] (for Response.ToolCalls)
// and the adapters of the contrib modules use it, and so may any adapter
// on [LLMRaw]. A live call's ids are bound to those of the recorded call it
// stands in for, and the run records the recorded ones wherever the live
// ones appear, so a live tail whose model says the same thing is
// equivalent to its base. Each run keeps its minted ids in its
// [trace.MintedFile]; renderings show them as placeholders.
package replay
