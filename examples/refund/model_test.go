package refund

import (
	"errors"
	"testing"
)

func TestParseDecision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		answer  string
		want    Decision
		wantErr bool
	}{
		{"bare object", `{"action":"refund","amount":19.9,"reason":"broken"}`, Decision{"refund", 19.9, "broken"}, false},
		{"fenced with prose", "Decision:\n```json\n{\"action\": \"Escalate\", \"amount\": 249.00, \"reason\": \"above limit\"}\n```",
			Decision{"escalate", 249, "above limit"}, false},
		{"no object", "I would refund it.", Decision{}, true},
		{"broken object", `{"action": "refund", "amount": }`, Decision{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDecision(tt.answer)
			if tt.wantErr {
				if !errors.Is(err, ErrNotADecision) {
					t.Fatalf("parseDecision(%q) error %v; want one matching ErrNotADecision", tt.answer, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("parseDecision(%q) = %+v, %v; want %+v", tt.answer, got, err, tt.want)
			}
		})
	}
}
