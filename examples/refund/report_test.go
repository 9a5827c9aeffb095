package refund_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/examples/refund"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/sftest"
)

// TestFailingAssertionPrintsAPage shows what a failing counterfactual
// assertion gives: the test output names an HTML page of the fork that
// failed (its fork point and change, the two runs aligned with the first
// divergence marked, the variant's timeline), written to the directory of
// -stepfork.report (or, with go test -artifacts, the test's artifact
// directory). The deliberately wrong assertion runs in a child process of
// this test binary, so the suite stays green:
//
//	go test -run TestFailingAssertionPrintsAPage -stepfork.report=/tmp/pages
func TestFailingAssertionPrintsAPage(t *testing.T) {
	if os.Getenv("REFUND_FAILING_CHILD") != "" {
		// The child: the fixed prompt asks for approval, so asserting that
		// the refund is still issued fails.
		w := newWorld(t)
		base := sftest.Load(t, "testdata/refund-failure.sftrace")
		v := sftest.Fork(t, base, fork.Failure(), w.agent.Run,
			fork.Prompt("decide", refund.ApprovalPrompt), fork.Allow("request_approval"))
		assert.ToolCalled(t, v, "issue_refund")
		return
	}
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(exe, "-test.run=^TestFailingAssertionPrintsAPage$", "-stepfork.report="+dir)
	cmd.Env = append(os.Environ(), "REFUND_FAILING_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the deliberately failing assertion passed:\n%s", out)
	}
	if !strings.Contains(string(out), "expected tool 'issue_refund' to be called") {
		t.Errorf("the child did not fail on the assertion:\n%s", out)
	}
	m := regexp.MustCompile(`sftest: the page of this failure: (\S+\.html)`).FindStringSubmatch(string(out))
	if m == nil || !strings.HasPrefix(m[1], dir) {
		t.Fatalf("no page of the failure under %s was printed:\n%s", dir, out)
	}
	page, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatalf("the printed page does not exist: %v", err)
	}
	for _, want := range []string{"first divergence", "prompt of &#39;decide&#39;", "request_approval"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page %s lacks %q", m[1], want)
		}
	}
	if strings.Contains(string(page), fakeAPIKey) {
		t.Errorf("the page %s shows the API key", m[1])
	}
}
