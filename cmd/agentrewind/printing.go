package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Recorded sessions and bundles come from other people: a call site, a model name or a message can
// hold terminal control sequences that would set the window title, recolour the screen or forge
// lines and table rows. Every human-readable output of the session commands passes what it read
// through printable; -o json prints the bytes exactly (encoding/json escapes controls itself).

// printable escapes the characters of s a terminal would act on rather than show: C0 controls other
// than tab, DEL, C1 controls, the line and paragraph separators U+2028/U+2029 and the bidirectional
// overrides and isolates (U+202A–U+202E, U+2066–U+2069), and invalid UTF-8 bytes. Escapes are Go's
// (\n, \r, \x1b, \u202e), so what a sequence was stays visible.
func printable(s string) string { return escapeControls(s, false) }

// printableCell is printable for a cell of a tab-separated table: a tab is escaped too, or it would
// start another column.
func printableCell(s string) string { return escapeControls(s, true) }

func escapeControls(s string, tab bool) string {
	if !needsEscape(s, tab) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !escaped(r, tab):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string, tab bool) bool {
	for i, r := range s {
		if escaped(r, tab) || (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) {
			return true
		}
	}
	return false
}

func escaped(r rune, tab bool) bool {
	switch {
	case r == '\t':
		return tab
	case r < 0x20, r == 0x7f, 0x80 <= r && r <= 0x9f:
		return true
	case r == 0x2028, r == 0x2029, 0x202a <= r && r <= 0x202e, 0x2066 <= r && r <= 0x2069:
		return true
	}
	return false
}

// escapedError shows an error's text through printable; errors.As and the exit code see the error
// it wraps. A drift keeps the line breaks of its diff: its fields are escaped one by one instead.
type escapedError struct{ err error }

func (e *escapedError) Error() string {
	msg := e.err.Error()
	d, ok := errors.AsType[*replay.DriftError](e.err)
	if !ok {
		return printable(msg)
	}
	before, after, found := strings.Cut(msg, d.Error())
	if !found {
		return printable(msg)
	}
	return printable(before) + printableDrift(d).Error() + printable(after)
}

func (e *escapedError) Unwrap() error { return e.err }

// printableDrift is a copy of d whose text fields are escaped: its Error() breaks lines only itself.
func printableDrift(d *replay.DriftError) *replay.DriftError {
	safe := *d
	safe.Kind, safe.Lane, safe.CallSite = session.Kind(printable(string(d.Kind))), printable(d.Lane), printable(d.CallSite)
	safe.Fingerprint, safe.Reason = printable(d.Fingerprint), printable(d.Reason)
	if d.Expected != nil {
		ev := *d.Expected
		ev.Kind, ev.CallSite = session.Kind(printable(string(ev.Kind))), printable(ev.CallSite)
		safe.Expected = &ev
	}
	safe.Diff = make([]string, len(d.Diff))
	for i, line := range d.Diff {
		safe.Diff[i] = printable(line)
	}
	return &safe
}

// escapeErr wraps err, when there is one, so that what it quotes from a session prints safely.
func escapeErr(err error) error {
	if err == nil {
		return nil
	}
	if _, done := errors.AsType[*escapedError](err); done {
		return err // escaped once already: a second pass would print the escapes escaped
	}
	return &escapedError{err}
}

// escapeAllErrors makes every command under root print its error through printableLines: errors quote
// paths, ids and names that came from a bundle, a store or a workspace someone else wrote.
func escapeAllErrors(root *cobra.Command) {
	if root.RunE != nil {
		root.RunE = escapingRunE(root.RunE)
	}
	for _, c := range root.Commands() {
		escapeAllErrors(c)
	}
}

// escapingRunE makes the error a command returns print through printableLines.
func escapingRunE(run func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error { return escapeErr(run(cmd, args)) }
}

// outputFlagYAML adds --output (text, json or yaml) to a command whose output is a document: the
// commands of the kubectl plugin, and the ones it shares with agentrewind.
func outputFlagYAML(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "text", "output format: text, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion("text", "json", "yaml"))
}

func checkOutputYAML(output string) error {
	switch output {
	case "text", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output %q is not supported: use text, json or yaml", output)
}

// structured says whether output asks for a document (json or yaml) rather than text.
func structured(output string) bool { return output == "json" || output == "yaml" }

// writeDocument prints v as YAML for -o yaml, else as indented JSON. The YAML is the JSON's, converted,
// so both carry the same field names and a YAML reader gets exactly what -o json prints.
func writeDocument(w io.Writer, output string, v any) error {
	if output != "yaml" {
		return writeJSON(w, v)
	}
	data, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
