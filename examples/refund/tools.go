package refund

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// Order is an order of the shop, as lookup_order returns it.
type Order struct {
	OrderID   string  `json:"order_id"`
	Customer  string  `json:"customer"`
	Item      string  `json:"item"`
	Category  string  `json:"category"`
	Amount    float64 `json:"amount"`
	DaysSince int     `json:"days_since_delivery"`
}

// DemoOrders is the order book the agent uses when Config.Orders is nil.
func DemoOrders() map[string]Order {
	return map[string]Order{
		"o_1001": {OrderID: "o_1001", Customer: "c_311", Item: "USB-C cable, 2 m", Category: "accessories", Amount: 19.90, DaysSince: 4},
		"o_1842": {OrderID: "o_1842", Customer: "c_77", Item: "Pro blender 1200 W", Category: "appliances", Amount: 249.00, DaysSince: 6},
		"o_0950": {OrderID: "o_0950", Customer: "c_208", Item: "Desk lamp", Category: "home", Amount: 34.50, DaysSince: 45},
		"o_2210": {OrderID: "o_2210", Customer: "c_502", Item: "Espresso machine", Category: "appliances", Amount: 89.00, DaysSince: 12},
	}
}

// OrderQuery is lookup_order's input.
type OrderQuery struct {
	OrderID string `json:"order_id"`
}

// ErrUnknownOrder is returned by lookup_order for an order the shop does not
// have.
var ErrUnknownOrder = errors.New("unknown order")

func (a *Agent) lookupOrderTool(_ context.Context, q OrderQuery) (Order, error) {
	o, ok := a.cfg.Orders[q.OrderID]
	if !ok {
		return Order{}, fmt.Errorf("lookup_order: %w %q", ErrUnknownOrder, q.OrderID)
	}
	return o, nil
}

// PolicyQuery is get_refund_policy's input.
type PolicyQuery struct {
	Category string `json:"category"`
}

// Policy is the refund policy of a product category.
type Policy struct {
	RuleID          string  `json:"rule_id"`
	Category        string  `json:"category"`
	WindowDays      int     `json:"window_days"`
	AutoRefundLimit float64 `json:"auto_refund_limit"`
	Text            string  `json:"text"`
}

func getRefundPolicy(_ context.Context, q PolicyQuery) (Policy, error) {
	limit := 100.0
	if q.Category == "accessories" {
		limit = 50
	}
	return Policy{
		RuleID: "RP-" + strings.ToUpper(q.Category), Category: q.Category, WindowDays: 30, AutoRefundLimit: limit,
		Text: fmt.Sprintf("Damaged or faulty items are refunded in full within 30 days of delivery. "+
			"Refunds above %.2f USD need the approval of the refunds team.", limit),
	}, nil
}

// RefundOrder is issue_refund's input.
type RefundOrder struct {
	OrderID    string  `json:"order_id"`
	Amount     float64 `json:"amount"`
	ApprovedBy string  `json:"approved_by"`
}

// Receipt is what issue_refund returns.
type Receipt struct {
	RefundID string `json:"refund_id"`
}

// ledgerMu serializes appends to the ledger and approvals files of every
// agent in the process.
var ledgerMu sync.Mutex

// appendLine appends one tab-separated line to the file at path.
func appendLine(path string, fields ...string) error {
	ledgerMu.Lock()
	defer ledgerMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strings.Join(fields, "\t") + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// issueRefundTool pays a refund: it appends a line to the ledger. This is the
// side effect that must never happen in a replay or a fork.
func (a *Agent) issueRefundTool(_ context.Context, r RefundOrder) (Receipt, error) {
	id := "rf_" + r.OrderID
	if err := appendLine(a.cfg.LedgerPath, id, r.OrderID, fmt.Sprintf("%.2f", r.Amount), "USD", r.ApprovedBy); err != nil {
		return Receipt{}, fmt.Errorf("issue_refund: writing the ledger: %w", err)
	}
	return Receipt{RefundID: id}, nil
}

// ApprovalRequest is request_approval's input.
type ApprovalRequest struct {
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
	Reason  string  `json:"reason"`
}

// Ticket is the case request_approval filed for the refunds team.
type Ticket struct {
	ID string `json:"id"`
}

// requestApprovalTool files the case for the refunds team: it appends a line
// to the approvals file.
func (a *Agent) requestApprovalTool(_ context.Context, r ApprovalRequest) (Ticket, error) {
	id := "apr_" + r.OrderID
	if err := appendLine(a.cfg.ApprovalsPath, id, r.OrderID, fmt.Sprintf("%.2f", r.Amount), r.Reason); err != nil {
		return Ticket{}, fmt.Errorf("request_approval: writing the approvals queue: %w", err)
	}
	return Ticket{ID: id}, nil
}

// Proposal is what the agent asks a person to confirm before paying.
type Proposal struct {
	OrderID  string  `json:"order_id"`
	Customer string  `json:"customer"`
	Amount   float64 `json:"amount"`
	Reason   string  `json:"reason"`
}

// Approval is a person's answer to a Proposal.
type Approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by,omitempty"`
	Note     string `json:"note,omitempty"`
}

// Approver asks a person to confirm a refund (a chat message, a dashboard,
// a terminal prompt). Its answer is recorded (replay.Approve) and served on
// replay, so nobody is asked twice.
type Approver func(ctx context.Context, p Proposal) (Approval, error)
