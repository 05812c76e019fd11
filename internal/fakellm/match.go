package fakellm

import (
	"encoding/json"
	"strings"
)

// facts are what turn selection and the answer need from a request, gathered by the provider's
// decoder.
type facts struct {
	model   string
	system  string // the system prompt's text
	last    string // the text of the last message
	step    int    // 1 + the number of assistant messages
	stream  bool
	usage   bool // OpenAI stream_options.include_usage
	prompt  int64
	canonic []byte // the request as canonical JSON without its stream options, for ids
}

// matches reports whether every condition of m holds for the request.
func (m Match) matches(f *facts) bool {
	return (m.Step == 0 || m.Step == f.step) &&
		contains(f.system, m.System) && contains(f.last, m.Message) && contains(f.model, m.Model)
}

// selectTurn is the index of the first turn matching the request, or -1.
func (s *Script) selectTurn(f *facts) int {
	for i := range s.Turns {
		if s.Turns[i].When.matches(f) {
			return i
		}
	}
	return -1
}

// contentText is the text of a message content as either provider sends it: a string, or an array
// of blocks whose text, and whose nested content (a tool result's), is collected.
func contentText(raw json.RawMessage) string {
	var parts []string
	collectText(raw, &parts)
	return strings.Join(parts, "\n")
}

func collectText(raw json.RawMessage, parts *[]string) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		*parts = append(*parts, s)
		return
	}
	var blocks []struct {
		Text    *string         `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return
	}
	for _, b := range blocks {
		if b.Text != nil {
			*parts = append(*parts, *b.Text)
		}
		if len(b.Content) > 0 {
			collectText(b.Content, parts)
		}
	}
}

// estimateTokens is a deterministic token count: about four bytes a token, at least one.
func estimateTokens(n int) int64 {
	return max(1, int64(n+3)/4)
}
