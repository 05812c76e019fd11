package inspect

import "github.com/agentrewind/agentrewind/internal/engine/session"

// What says in a few words what an event is about, as a timeline row shows it: the model of a model
// call (marked when its stream was cut off), the tool of a tool call, source=value of an entropy
// draw, a note's text, a ledger record as written. Callers shorten it to their column, so the mark
// comes first.
func What(ev *session.Event) string {
	switch ev.Kind {
	case session.KindModelCall:
		model := ""
		if ev.Request != nil {
			model = ev.Request.Model
		}
		if ev.Truncated() {
			return TruncatedMark + model
		}
		return model
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

// TruncatedMark starts What of a model call whose stream the upstream cut off.
const TruncatedMark = "[stream truncated] "
