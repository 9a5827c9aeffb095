// Package scopepath names the scopes of a run as its concurrent groups are
// keyed: a call or node made inside another hangs under its label, so that
// replay's matching and the diff's grouping read the same paths
// ("/node:worker/tool:fetch").
package scopepath

import "github.com/stepfork/stepfork/trace"

// Label names an event as a scope: "node:<name>", "tool:<name>",
// "llm:<provider/model>", else "<type>:<label>".
func Label(ev *trace.Event) string {
	switch {
	case ev.Type == trace.ToolCall:
		return "tool:" + ev.Name
	case ev.Type == trace.LLMRequest:
		return "llm:" + trace.LLMLabel(ev.Provider, ev.Model)
	case ev.IsMarker():
		m, _ := ev.Marker()
		return "node:" + m.Name
	}
	return string(ev.Type) + ":" + ev.Label()
}
