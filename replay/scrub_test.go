package replay_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/internal/fakeprovider"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// The customer text no pattern knows is secret, and the scrubber that
// knows it.
const (
	customerEmail   = "dana.q" + "@customer-example.org"
	customerAccount = "ACCT-" + "4417-2298"
)

var scrubCustomer = replay.Scrubbers{
	trace.ScrubPattern(regexp.MustCompile(`[\w.+-]+@[\w-]+(\.[\w-]+)+`)),
	trace.ScrubPattern(regexp.MustCompile(`ACCT-\d{4}-\d{4}`)),
}

// customerAgent carries the customer's data everywhere a string goes: the
// run input, a tool's input and output, a model's prompt and answer, a
// state value and key, a decision, and its error.
func customerAgent(fail bool) replay.Agent { return customerAgentAsking("", fail) }

// customerAgentAsking looks up email instead of the input's, when given.
func customerAgentAsking(email string, fail bool) replay.Agent {
	lookup := replay.Tool("lookup", func(_ context.Context, email string) (map[string]any, error) {
		return map[string]any{"email": email, "account": customerAccount, customerAccount: "as a key"}, nil
	})
	model := func(_ context.Context, req replay.Request) (replay.Response, error) {
		return replay.Response{Content: "write to " + customerEmail}, nil
	}
	return replay.Typed(func(ctx context.Context, in map[string]string) (string, error) {
		if email == "" {
			email = in["email"]
		}
		acct, err := lookup(ctx, email)
		if err != nil {
			return "", err
		}
		replay.Set(ctx, "last_"+customerAccount, acct)
		resp, err := replay.LLM(ctx, replay.Request{Model: "m", Messages: []replay.Message{{Role: "user", Content: "help " + in["email"]}}}, model)
		if err != nil {
			return "", err
		}
		replay.Decide(ctx, "reply_to", customerEmail)
		if fail {
			return "", fmt.Errorf("cannot refund %s for %s", customerAccount, customerEmail)
		}
		return resp.Content, nil
	})
}

// noCustomerData fails when any file under dir, or text, holds the
// customer's data.
func noCustomerData(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{customerEmail, customerAccount} {
		if strings.Contains(text, s) {
			t.Errorf("%s holds %q", what, s)
		}
	}
}

func noCustomerDataIn(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			noCustomerData(t, p, string(b))
		}
		return nil
	})
}

// TestScrubbersOnRecordAndReplay records a run with scrubbers: the trace in
// memory and the saved bundle hold none of the customer's data, whose
// places are listed in redactions.json with the reason "scrubber"; a
// replay with the same scrubbers matches the recording call for call; a
// divergence's error quotes nothing a scrubber removes.
func TestScrubbersOnRecordAndReplay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "run.sftrace")
	in := map[string]string{"email": customerEmail}
	res, err := replay.Record(context.Background(), "support", in, customerAgent(true), scrubCustomer, replay.SaveTo(path))
	if err != nil {
		t.Fatal(err)
	}
	noCustomerDataIn(t, dir)
	data, _ := os.ReadFile(filepath.Join(path, trace.RedactionsFile))
	if !strings.Contains(string(data), `"reason": "scrubber"`) {
		t.Errorf("redactions.json lists no scrubber finding:\n%s", data)
	}
	if rep := trace.ValidateBundle(context.Background(), path, trace.CheckIntegrity()); !rep.Valid() {
		t.Errorf("the bundle is not valid: %v", rep.Issues)
	}
	noCustomerData(t, "the trace's failure", res.Trace.Failure.Message)

	again, err := replay.Replay(context.Background(), res.Trace, customerAgent(true), scrubCustomer)
	if err != nil {
		t.Fatal(err)
	}
	if again.Divergence != nil {
		t.Fatalf("a replay with the same scrubbers diverged: %v", again.Divergence)
	}
	noCustomerData(t, "the replay's trace", fmt.Sprint(again.Trace.Events))

	// Another customer's e-mail is scrubbed as the recorded one was, and
	// what differs besides diverges; the message quotes it scrubbed.
	div, err := replay.Replay(context.Background(), res.Trace, customerAgentAsking("lee"+"@other-example.net urgently", true), scrubCustomer)
	if div == nil || div.Divergence == nil {
		t.Fatalf("Replay = %v, %v; want a divergence", div, err)
	}
	for _, e := range []error{err, div.Divergence, div.Err} {
		if e != nil {
			noCustomerData(t, "the divergence", e.Error())
			if strings.Contains(e.Error(), "@other-example.net") {
				t.Errorf("the divergence quotes the live e-mail: %v", e)
			}
		}
	}
}

// TestScrubbersOnTransport installs scrubbers on a Transport only: the
// whole run is scrubbed, the input recorded before the first request
// included.
func TestScrubbersOnTransport(t *testing.T) {
	t.Parallel()
	srv := fakeprovider.New()
	t.Cleanup(srv.Close)
	srv.SetAnswer("reply to " + customerEmail)
	client := newClient(t, scrubCustomer)
	c := fakeprovider.AllWires()[0]
	dir := t.TempDir()
	path := filepath.Join(dir, "run.sftrace")
	res, err := replay.Record(context.Background(), "wire", map[string]string{"email": customerEmail},
		c.Agent(srv, client, "m-1"), replay.SaveTo(path))
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	noCustomerDataIn(t, dir)
	noCustomerData(t, "the trace", fmt.Sprint(res.Trace.Events))
}

// TestScrubbersOnSampler samples runs with scrubbers: no bundle holds the
// customer's data.
func TestScrubbersOnSampler(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &replay.Sampler{Dir: dir, Keep: func(*replay.Result) bool { return true }, Scrub: scrubCustomer}
	for i := range 5 {
		s.Run(context.Background(), "support", map[string]string{"email": customerEmail}, customerAgent(i%2 == 0))
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Saved != 5 {
		t.Fatalf("stats %+v", st)
	}
	noCustomerDataIn(t, dir)
}

// TestCredentialNamesRefused checks that a run id or an agent name holding
// a credential (glued to a word too) is refused before the run starts,
// with an error that does not quote it.
func TestCredentialNamesRefused(t *testing.T) {
	t.Parallel()
	ghp := "ghp_" + "R2d2C3poBb8Ewok5Yoda9Luke"
	agent := replay.Typed(func(context.Context, int) (int, error) { return 1, nil })
	ran := false
	spy := replay.Typed(func(context.Context, int) (int, error) { ran = true; return 1, nil })
	for _, tc := range []struct {
		name string
		opts []replay.RecordOption
	}{
		{"agent " + ghp, nil},
		{"agent_" + ghp, nil},
		{"agent", []replay.RecordOption{replay.RunID("run_" + ghp)}},
		{"agent " + customerEmail, []replay.RecordOption{scrubCustomer}},
	} {
		res, err := replay.Record(context.Background(), tc.name, 1, spy, tc.opts...)
		if err == nil || !errors.Is(err, replay.ErrInvalidOptions) || res != nil {
			t.Errorf("Record(%q) = %v, %v; want it refused", tc.name, res, err)
			continue
		}
		if strings.Contains(err.Error(), "R2d2C3po") || strings.Contains(err.Error(), customerEmail) {
			t.Errorf("the error quotes the secret: %v", err)
		}
	}
	if ran {
		t.Error("the agent ran")
	}
	if _, err := replay.Record(context.Background(), "agent", 1, agent); err != nil {
		t.Error(err)
	}
}
