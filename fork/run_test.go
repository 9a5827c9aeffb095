package fork

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
