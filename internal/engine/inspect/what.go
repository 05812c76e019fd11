package inspect

import "github.com/agentrewind/agentrewind/internal/engine/session"

// What says in a few words what an event is about, as a timeline row shows it: the model of a model
// call, the tool of a tool call, source=value of an entropy draw, a note's text, a ledger record as
// written. Callers shorten it to their column.
func What(ev *session.Event) string {
	switch ev.Kind {
	case session.KindModelCall:
		if ev.Request != nil {
			return ev.Request.Model
		}
	case session.KindToolCall:
		return ev.Name
	case session.KindEntropy:
		return string(ev.Source) + "=" + string(ev.Value)
	case session.KindNote:
		return ev.Text
	case session.KindLedger:
		return string(ev.Ledger)
	}
	return ""
}
