package proxy

import (
	"encoding/json"
	"fmt"

	"github.com/agentrewind/agentrewind/internal/engine/codec/openai"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// chainCodec is a codec whose requests may continue an earlier response by naming its id (the
// Responses API's previous_response_id), which only the provider that minted it can resolve.
type chainCodec interface {
	ResponseID(resp session.Response) string
	ExpandPrevious(req session.Request, recorded func(id string) (openai.Exchange, bool)) (session.Request, bool, error)
}

// recordedChains is how a fork's live tail continues a conversation its served prefix began: the
// agent names a response it was served from the recording, which the live provider never minted (or
// has forgotten, or keeps under another key), so the request goes upstream with the recorded
// conversation spelled out as input items instead. The recorded requests and responses are
// redacted; the vault, when the run has one, puts the secrets back before they go upstream, as the
// agent sent and got them. It returns nil when the codec has no chains or the session no responses.
func recordedChains(codec WireCodec, parent *session.Session, vaultOf func() *redact.Vault) func(session.Request) (session.Request, error) {
	cc, ok := codec.(chainCodec)
	if !ok || parent == nil {
		return nil
	}
	recorded := map[string]openai.Exchange{}
	for i := range parent.Events {
		ev := &parent.Events[i]
		if ev.Kind != session.KindModelCall || ev.Request == nil || ev.Response == nil {
			continue
		}
		if id := cc.ResponseID(*ev.Response); id != "" {
			recorded[id] = openai.Exchange{Request: *ev.Request, Response: *ev.Response}
		}
	}
	if len(recorded) == 0 {
		return nil
	}
	lookup := func(id string) (openai.Exchange, bool) {
		ex, ok := recorded[id]
		return ex, ok
	}
	return func(req session.Request) (session.Request, error) {
		out, expanded, err := cc.ExpandPrevious(req, lookup)
		if err != nil {
			return req, fmt.Errorf("continuing a recorded response: %w", err)
		}
		vault := vaultOf()
		if !expanded || vault == nil || vault.Len() == 0 {
			return out, nil
		}
		doc, err := json.Marshal(out)
		if err == nil {
			doc, err = vault.RestoreJSON(doc)
		}
		var restored session.Request
		if err == nil {
			err = json.Unmarshal(doc, &restored)
		}
		if err != nil {
			return req, fmt.Errorf("restoring the secrets of a recorded conversation: %w", err)
		}
		return restored, nil
	}
}
