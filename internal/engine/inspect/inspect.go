package inspect

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Tokenizer counts the tokens of text for a model, when it knows the model.
type Tokenizer func(model, text string) (tokens int, ok bool)

// TokenCount is a number of tokens and whether it is an estimate.
type TokenCount struct {
	Tokens   int64
	Estimate bool
}

// CountTokens counts a model call's prompt tokens by the best tier available: exactly from the
// recorded usage, else from a tokenizer that knows the model, else as one token per four characters
// (an estimate).
func CountTokens(ev *session.Event, tok Tokenizer) TokenCount {
	if ev.Usage != nil && ev.Usage.InputTokens > 0 {
		return TokenCount{Tokens: ev.Usage.InputTokens}
	}
	text := promptText(ev.Request)
	if tok != nil && ev.Request != nil {
		if n, ok := tok(ev.Request.Model, text); ok {
			return TokenCount{Tokens: int64(n)}
		}
	}
	return TokenCount{Tokens: int64((utf8.RuneCountInString(text) + 3) / 4), Estimate: true}
}

func promptText(req *session.Request) string {
	if req == nil {
		return ""
	}
	var b bytes.Buffer
	b.WriteString(req.System)
	for _, m := range req.Messages {
		b.Write(m.Content)
	}
	return b.String()
}

// ContextAt returns the prompt context — the messages sent — of the model call at step.
func ContextAt(events []session.Event, step int64) ([]session.Message, error) {
	ev, err := modelCallAt(events, step)
	if err != nil {
		return nil, err
	}
	if ev.Request == nil {
		return nil, nil
	}
	return ev.Request.Messages, nil
}

func modelCallAt(events []session.Event, step int64) (*session.Event, error) {
	for i := range events {
		if events[i].Step != step {
			continue
		}
		if events[i].Kind != session.KindModelCall {
			return nil, &StepError{Step: step, Want: session.KindModelCall, Got: events[i].Kind}
		}
		return &events[i], nil
	}
	return nil, &StepError{Step: step, Want: session.KindModelCall}
}

// ContextDiff is how the prompt context changed between two model calls.
type ContextDiff struct {
	From, To   int64
	Added      []session.Message
	Removed    []session.Message
	TokenDelta int64
	// TokenDeltaIsEstimate is true when either side's count was estimated.
	TokenDeltaIsEstimate bool
}

// DiffContext compares the contexts of the model calls at steps a and b. Messages are compared by
// their canonical JSON, so formatting differences do not count as changes.
func DiffContext(events []session.Event, a, b int64, tok Tokenizer) (*ContextDiff, error) {
	from, err := modelCallAt(events, a)
	if err != nil {
		return nil, err
	}
	to, err := modelCallAt(events, b)
	if err != nil {
		return nil, err
	}
	d := &ContextDiff{From: a, To: b}
	fromMsgs, toMsgs := messagesOf(from), messagesOf(to)
	d.Removed = missingFrom(fromMsgs, toMsgs)
	d.Added = missingFrom(toMsgs, fromMsgs)
	ca, cb := CountTokens(from, tok), CountTokens(to, tok)
	d.TokenDelta = cb.Tokens - ca.Tokens
	d.TokenDeltaIsEstimate = ca.Estimate || cb.Estimate
	return d, nil
}

func messagesOf(ev *session.Event) []session.Message {
	if ev.Request == nil {
		return nil
	}
	return ev.Request.Messages
}

// missingFrom returns the messages of xs that ys does not hold, counting duplicates.
func missingFrom(xs, ys []session.Message) []session.Message {
	have := map[string]int{}
	for _, y := range ys {
		have[messageKey(y)]++
	}
	var out []session.Message
	for _, x := range xs {
		k := messageKey(x)
		if have[k] > 0 {
			have[k]--
			continue
		}
		out = append(out, x)
	}
	return out
}

func messageKey(m session.Message) string {
	doc, _ := json.Marshal(m)
	if c, err := fingerprint.CanonicalizeJSON(doc); err == nil {
		return string(c)
	}
	return string(doc)
}
