package rewind

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// MaxExcerptBytes bounds the environment excerpt a note carries: a note line must fit a status field
// (1 KiB) with its marker. A cut says so, because a silently truncated error reads as a whole one.
const MaxExcerptBytes = 900

// EnvExcerpt is an environment error excerpt (a traceback, a failing command's output) with the author
// of its bytes. Its fields are unexported so the author travels with the text: the gate reads who
// wrote the bytes, never what they say.
type EnvExcerpt struct {
	text   string
	author session.Author
}

// NewEnvExcerpt wraps bytes and their author as recorded. The author must come from the recording
// (session.Event.Author) — labelling agent prose THIRD_PARTY would be a lie about its byte-author that
// the boundary must not tell.
func NewEnvExcerpt(text string, author session.Author) EnvExcerpt {
	return EnvExcerpt{text: text, author: author}
}

// Text is the excerpt's bytes.
func (e EnvExcerpt) Text() string { return e.text }

// Author is who wrote the excerpt's bytes.
func (e EnvExcerpt) Author() session.Author { return e.author }

// Attaches reports whether the excerpt may go into a note: non-empty, and authored by the recorder or
// a third party. This is an allow-list: agent-authored bytes and bytes of unknown author are filtered.
func (e EnvExcerpt) Attaches() bool {
	if e.text == "" {
		return false
	}
	return e.author == session.AuthorRecorder || e.author == session.AuthorThirdParty
}

// lines renders the excerpt under a kernel-authored header: the header is the kernel's, the body the
// environment's, and both are unforged.
func (e EnvExcerpt) lines() []string {
	return []string{fmt.Sprintf("env error excerpt [%s]:", e.author), clamp(e.text, MaxExcerptBytes)}
}

// clamp cuts s to at most max bytes on a rune boundary and says where it cut.
func clamp(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s … [excerpt truncated here: %d bytes, %d kept]", s[:cut], len(s), cut)
}

// Note is the no-good note handed to the agent after a rewind. It can only be built by BuildNote, so
// it only ever holds registry-known tokens and an excerpt that passed the author gate.
type Note struct {
	tokens []Token
	env    *EnvExcerpt
	reg    *Registry
}

// BuildNote assembles a note from closed verdict tokens and an optional environment excerpt. Tokens
// whose kind the registry does not know (including the zero Token an invalid constructor call
// returns) are dropped; the excerpt is dropped unless it Attaches. A nil registry is BaseRegistry.
func BuildNote(tokens []Token, env EnvExcerpt, reg *Registry) Note {
	if reg == nil {
		reg = BaseRegistry()
	}
	n := Note{reg: reg}
	for _, t := range tokens {
		if reg.Known(t.kind) {
			n.tokens = append(n.tokens, t)
		}
	}
	if env.Attaches() {
		n.env = &env
	}
	return n
}

// Tokens are the tokens the note kept.
func (n Note) Tokens() []Token { return append([]Token(nil), n.tokens...) }

// Env is the attached excerpt, if one crossed the author gate.
func (n Note) Env() (EnvExcerpt, bool) {
	if n.env == nil {
		return EnvExcerpt{}, false
	}
	return *n.env, true
}

// Empty reports whether the note carries nothing.
func (n Note) Empty() bool { return len(n.tokens) == 0 && n.env == nil }

// Lines is the note's text, line by line: rendered tokens, then the excerpt. There is no other source
// of bytes.
func (n Note) Lines() []string {
	lines := []string{}
	for _, t := range n.tokens {
		if s, ok := n.reg.Render(t); ok {
			lines = append(lines, s)
		}
	}
	if n.env != nil {
		lines = append(lines, n.env.lines()...)
	}
	return lines
}

// noteJSON is the note's JSON form.
type noteJSON struct {
	Tokens []tokenJSON `json:"tokens"`
	Env    *envJSON    `json:"envExcerpt"`
	Lines  []string    `json:"lines"`
}

type tokenJSON struct {
	Kind     TokenKind `json:"kind"`
	Rendered string    `json:"rendered"`
}

type envJSON struct {
	Author session.Author `json:"author"`
	Text   string         `json:"text"`
}

// MarshalJSON renders the note for a result file: each token with its rendering, the excerpt, lines.
func (n Note) MarshalJSON() ([]byte, error) {
	out := noteJSON{Tokens: []tokenJSON{}, Lines: n.Lines()}
	for _, t := range n.tokens {
		s, _ := n.reg.Render(t)
		out.Tokens = append(out.Tokens, tokenJSON{Kind: t.kind, Rendered: s})
	}
	if n.env != nil {
		out.Env = &envJSON{Author: n.env.author, Text: clamp(n.env.text, MaxExcerptBytes)}
	}
	return json.Marshal(out)
}
