package fork

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/trace"
)

func TestRegenerate(t *testing.T) {
	for _, c := range agentCases {
		tr := loadCase(t, c)
		assert.NotEmpty(t, tr.Events, c.path)
	}
}

func TestRunRefundPromptFix(t *testing.T) {
	t.Parallel()
	c, base := caseNamed(t, "refund")
	w := &world{}
	v, err := Run(context.Background(), base, Failure(), c.agent(w),
		Prompt("decide", "Refunds above the policy limit need approval."), Memoize())
	require.NoError(t, err)
	t.Log(v.Explain())
	assert.Equal(t, StatusCompleted, v.Status)
}

// TestRunReusesTheIndexOfItsBase forks one base twice and then a changed
// copy of its events: the variants name the caller's base, the second fork
// shares the first one's index, and a base whose events were replaced is
// indexed again rather than served a stale index.
func TestRunReusesTheIndexOfItsBase(t *testing.T) {
	t.Parallel()
	c, loaded := caseNamed(t, "refund")
	base := loaded.Clone()
	w := &world{}
	first, err := Run(context.Background(), base, Failure(), c.agent(w), Memoize())
	require.NoError(t, err)
	assert.Same(t, base, first.Base, "Variant.Base is the caller's trace")
	ix := indexOf(base)
	second, err := Run(context.Background(), base, Failure(), c.agent(w), Memoize())
	require.NoError(t, err)
	assert.Same(t, base, second.Base)
	assert.Same(t, ix, indexOf(base), "a second fork of an unchanged base builds no new index")
	assert.Equal(t, first.Diff.Equivalent(), second.Diff.Equivalent())

	base.Events = append([]trace.Event(nil), base.Events...)
	assert.NotSame(t, ix, indexOf(base), "a base whose events were replaced is indexed again")
	third, err := Run(context.Background(), base, Failure(), c.agent(w), Memoize())
	require.NoError(t, err)
	assert.Same(t, base, third.Base)
}
