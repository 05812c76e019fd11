package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/bundle"
	"github.com/agentrewind/agentrewind/internal/engine/codec"
	"github.com/agentrewind/agentrewind/internal/engine/inspect"
	"github.com/agentrewind/agentrewind/internal/engine/price"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// Exit codes of the session commands, so scripts can tell a damaged recording from a drifted replay.
const (
	exitError   = 1
	exitCorrupt = 2
	exitDrift   = 3
)

// codedError carries the process exit code for an error.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// classify gives an error its exit code: corruption and drift get their own.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case isType[*replay.DriftError](err):
		return &codedError{exitDrift, err}
	case isCorrupt(err):
		return &codedError{exitCorrupt, err}
	}
	return err
}

// isCorrupt reports whether err says a session or bundle is corrupt, tampered with, not committed or
// incomplete — what the session, bundle and blob store readers return about the bytes they read,
// as opposed to a failure to read them.
func isCorrupt(err error) bool {
	for _, sentinel := range []error{session.ErrNotCommitted, session.ErrIncomplete, blobstore.ErrVaultMissing, blobstore.ErrMetaUnverified} {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	return isType[*session.DigestMismatchError](err) || isType[*session.CorruptEventError](err) ||
		isType[*session.CorruptMetaError](err) || isType[*session.MigrationError](err) ||
		isType[*session.MissingError](err) || isType[*session.BlobRefError](err) || isType[*session.RefError](err) || isType[*session.TextError](err) ||
		isType[*session.TooLargeError](err) ||
		isType[*replay.FingerprintMismatchError](err) ||
		isType[*bundle.UnsafeEntryError](err) || isType[*bundle.BlobHashError](err) || isType[*bundle.MissingEntryError](err) ||
		isType[*bundle.TrailingDataError](err)
}

func isType[E error](err error) bool {
	_, ok := errors.AsType[E](err)
	return ok
}

// exitCode maps an error returned by the root command to the process exit code.
func exitCode(err error) int {
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitError
}

// outputFlag adds --output (text or json) to a command.
func outputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "text", "output format: text or json")
}

func checkOutput(output string) error {
	if output != "text" && output != "json" {
		return fmt.Errorf("--output %q is not supported: use text or json", output)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// openSession opens the committed session in dir. A path with nothing at it is a usage error (exit
// 1); a directory without meta.json is an uncommitted session (exit 2).
func openSession(dir string) (*session.Session, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no session at %s: the path does not exist", dir)
	}
	s, err := session.Open(dir)
	return s, classify(err)
}

// warnIfIncomplete prints a warning line when s is a run that stopped before session_end: readable,
// and worth sharing, but not a finished recording.
func warnIfIncomplete(w io.Writer, s *session.Session) {
	if s.CheckComplete() != nil {
		fmt.Fprintf(w, "warning: session %s is incomplete (no session_end): the run did not finish\n", printable(s.Meta.ID))
	}
}

// openForOutput checks --output and opens the session: the prologue of every session command.
func openForOutput(output, dir string) (*session.Session, error) {
	if err := checkOutput(output); err != nil {
		return nil, err
	}
	return openSession(dir)
}

func newInspectCommand() *cobra.Command {
	var output string
	var prices priceOptions
	cmd := &cobra.Command{
		Use:   "inspect <session-dir>",
		Short: "Print a recorded session's timeline: step, kind, lane, call site, fingerprint, tokens, cost",
		Long: `Print a recorded session's timeline: step, kind, lane, call site, fingerprint, tokens, cost and
provenance, then the session's total cost.

A model call's cost is its tokens at the list price of its model (input, output, cache writes and
cache reads), or the cost the recording states. A model without a price shows "unknown", never $0:
add its price with --price or --price-file.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutputYAML(output); err != nil {
				return err
			}
			table, err := prices.table()
			if err != nil {
				return err
			}
			s, err := openSession(args[0])
			if err != nil {
				return err
			}
			return printInspect(cmd.OutOrStdout(), cmd.ErrOrStderr(), output, s, table, nil)
		},
	}
	outputFlagYAML(cmd, &output)
	prices.register(cmd.Flags())
	return cmd
}

// costView is a cost as inspect prints it: micro-dollars, or why it is unknown.
type costView struct {
	MicroUSD *int64 `json:"microUSD,omitempty"`
	// Unknown says why there is no figure: the models without a price.
	Unknown string `json:"unknown,omitempty"`
}

func costViewOf(c price.Cost) costView {
	if micro, ok := c.MicroUSD(); ok {
		return costView{MicroUSD: &micro}
	}
	return costView{Unknown: c.Reason()}
}

// text is the cost in dollars, or "unknown".
func (c costView) text() string {
	if c.MicroUSD == nil {
		return "unknown"
	}
	return usdText(*c.MicroUSD)
}

// usdText shows micro-dollars as dollars: four decimals, six below a cent.
func usdText(micro int64) string {
	if micro < 10_000 {
		return fmt.Sprintf("$%d.%06d", micro/1_000_000, micro%1_000_000)
	}
	return fmt.Sprintf("$%d.%04d", micro/1_000_000, (micro%1_000_000+50)/100)
}

// printInspect renders a session's timeline: a table and its total cost (warnings on errOut), or with
// -o json|yaml a document of its meta, events and cost, to which extra adds fields. agentrewind
// inspect and kubectl rewind inspect both print through it.
func printInspect(out, errOut io.Writer, output string, s *session.Session, prices *price.Table, extra map[string]any) error {
	mismatches, err := replay.FingerprintMismatches(s, codec.ForProvider)
	if err != nil {
		return classify(err)
	}
	rows := timeline(s.Events, mismatches, prices)
	total := costViewOf(prices.Events(s.Events, nil))
	if structured(output) {
		doc := map[string]any{"meta": s.Meta, "events": rows, "cost": total}
		for k, v := range extra {
			doc[k] = v
		}
		return writeDocument(out, output, doc)
	}
	warnIfIncomplete(errOut, s)
	for _, m := range mismatches {
		fmt.Fprintf(errOut, "warning: %s\n", printable(m.Error()))
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "session %s (%d events, schema %d, parent %q)\n", printableCell(s.Meta.ID), len(s.Events), s.Meta.SchemaVersion, s.Meta.Parent)
	fmt.Fprintln(w, "STEP\tKIND\tLANE\tCALL SITE\tWHAT\tFINGERPRINT\tTOKENS\tCOST\tPROVENANCE")
	for _, r := range rows {
		fp := short12(r.Fingerprint)
		if r.FingerprintMismatch != "" {
			fp = "FORGED:" + fp // the stored fingerprint is not the stored call's
		}
		cost := ""
		if r.Cost != nil {
			cost = r.Cost.text()
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Step, printableCell(r.Kind), printableCell(r.Lane), printableCell(r.CallSite),
			printableCell(r.What), printableCell(fp), tokensText(r), cost, printableCell(r.Provenance))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if total.MicroUSD != nil {
		_, err = fmt.Fprintf(out, "cost %s\n", total.text())
	} else {
		_, err = fmt.Fprintf(out, "cost unknown: %s (add a price with --price or --price-file)\n", printable(total.Unknown))
	}
	return err
}

// timelineRow is one event as inspect shows it.
type timelineRow struct {
	Step        int64  `json:"step"`
	Kind        string `json:"kind"`
	Lane        string `json:"lane"`
	CallSite    string `json:"callSite"`
	What        string `json:"what,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	// FingerprintMismatch says why the stored fingerprint is not the one the stored call hashes to.
	FingerprintMismatch string `json:"fingerprintMismatch,omitempty"`
	InputTokens         int64  `json:"inputTokens,omitempty"`
	OutputTokens        int64  `json:"outputTokens,omitempty"`
	// Cost is a model call's cost at the price table.
	Cost       *costView `json:"cost,omitempty"`
	Provenance string    `json:"provenance,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// timeline lists events as inspect shows them, marking the steps whose stored fingerprint mismatches
// and pricing the model calls.
func timeline(events []session.Event, mismatches []*replay.FingerprintMismatchError, prices *price.Table) []timelineRow {
	forged := map[int64]string{}
	for _, m := range mismatches {
		forged[m.Step] = m.Error()
	}
	rows := make([]timelineRow, 0, len(events))
	for _, ev := range events {
		r := timelineRow{Step: ev.Step, Kind: string(ev.Kind), Lane: ev.Lane, CallSite: ev.CallSite, Provenance: string(ev.Provenance)}
		r.What = inspect.What(&ev)
		switch ev.Kind {
		case session.KindModelCall:
			r.Fingerprint = ev.RequestHash
			if ev.Usage != nil {
				r.InputTokens, r.OutputTokens = ev.Usage.InputTokens, ev.Usage.OutputTokens
			}
			cost := costViewOf(prices.Call(ev.Provider, price.ModelOf(&ev), ev.Usage))
			r.Cost = &cost
		case session.KindToolCall:
			r.Fingerprint = ev.ArgsHash
		}
		if utf8.RuneCountInString(r.What) > 60 {
			r.What = string([]rune(r.What)[:57]) + "..."
		}
		r.FingerprintMismatch = forged[ev.Step]
		if ev.Error != nil {
			r.Error = ev.Error.Error()
		}
		rows = append(rows, r)
	}
	return rows
}

func short12(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

func tokensText(r timelineRow) string {
	if r.InputTokens == 0 && r.OutputTokens == 0 {
		return ""
	}
	return fmt.Sprintf("%d→%d", r.InputTokens, r.OutputTokens)
}

func newContextCommand() *cobra.Command {
	var output string
	var step int64
	cmd := &cobra.Command{
		Use:   "context <session-dir> --step N",
		Short: "Print the prompt context (the messages sent) of the model call at a step",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openForOutput(output, args[0])
			if err != nil {
				return err
			}
			msgs, err := inspect.ContextAt(s.Events, step)
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), msgs)
			}
			for i, m := range msgs {
				fmt.Fprintf(cmd.OutOrStdout(), "[%d] %s: %s\n", i, printable(m.Role), printable(messageText(m.Content)))
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&step, "step", -1, "the step of a model call")
	_ = cmd.MarkFlagRequired("step")
	outputFlag(cmd, &output)
	return cmd
}

// messageText renders message content: a JSON string as its text, anything else as compact JSON.
func messageText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	return string(content)
}

func newDiffCommand() *cobra.Command {
	var output string
	var from, to int64
	cmd := &cobra.Command{
		Use:   "diff <session-dir> --from A --to B",
		Short: "Show how the prompt context changed between the model calls at two steps",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openForOutput(output, args[0])
			if err != nil {
				return err
			}
			d, err := inspect.DiffContext(s.Events, from, to, nil)
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), d)
			}
			out := cmd.OutOrStdout()
			for _, m := range d.Removed {
				fmt.Fprintf(out, "- %s: %s\n", printable(m.Role), printable(messageText(m.Content)))
			}
			for _, m := range d.Added {
				fmt.Fprintf(out, "+ %s: %s\n", printable(m.Role), printable(messageText(m.Content)))
			}
			estimate := ""
			if d.TokenDeltaIsEstimate {
				estimate = " (estimated)"
			}
			fmt.Fprintf(out, "tokens %+d%s\n", d.TokenDelta, estimate)
			return nil
		},
	}
	cmd.Flags().Int64Var(&from, "from", -1, "the step of the earlier model call")
	cmd.Flags().Int64Var(&to, "to", -1, "the step of the later model call")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
	outputFlag(cmd, &output)
	return cmd
}

func newVerifyCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "verify <session-dir>",
		Short: "Check a session: committed, complete, every line readable and in order, every hash intact",
		Long: `Check a session: committed (meta.json), complete (it ends with session_end), every line readable,
the log's structure (steps, lane sequence numbers, session markers, the event count), meta.json against
the log (its keys, and every field session_start also records), the events hash, every blob hash, the
sealed vault.enc against the vaultHash meta.json declares, and
every stored fingerprint (requestHash, argsHash) recomputed from the stored call, as compare does.

Exits 0 when the session is intact; 1 when there is no session at the path; 2 when it is corrupt,
tampered with, not committed (a directory without meta.json) or incomplete (a run that crashed before
session_end: still readable by plan, but not a finished recording).

meta.json is not signed: verify detects accidents and inconsistent edits, not someone who rewrites
meta.json to match an edited log.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			s, err := openSession(args[0])
			result := map[string]any{"session": args[0], "ok": err == nil}
			if err == nil {
				blobs := session.Blobs(s.Events)
				result["id"], result["events"], result["blobs"], result["eventsHash"] = s.Meta.ID, len(s.Events), len(blobs), s.Meta.EventsHash
				if verr := session.CheckVault(args[0], s.Meta); verr != nil {
					if errors.Is(verr, fs.ErrNotExist) {
						verr = fmt.Errorf("%w: %w", blobstore.ErrVaultMissing, verr)
					}
					err, s = classify(verr), nil
					result["ok"] = false
				} else if ferr := replay.CheckFingerprints(s, codec.ForProvider); ferr != nil {
					err, s = classify(ferr), nil
					result["ok"] = false
				} else if cerr := s.CheckComplete(); cerr != nil {
					err = classify(cerr)
					result["ok"], result["incomplete"] = false, true
				}
			}
			if err != nil {
				result["error"] = err.Error()
				if output == "json" {
					_ = writeJSON(cmd.OutOrStdout(), result)
				} else if s != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "session %s is incomplete (no session_end): %d events, hashes intact, but the run did not finish\n",
						printable(s.Meta.ID), len(s.Events))
				}
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), result)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "session %s is intact: %d events, %d blobs, events hash %s\n",
				printable(s.Meta.ID), len(s.Events), result["blobs"], s.Meta.EventsHash)
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func newCompareCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "compare <golden-session-dir> <candidate-session-dir>",
		Short: "Check that a run crossed the boundary exactly as a golden recording did",
		Long: `Check that a candidate run made the same boundary calls as a golden recording: the same model
requests, tool calls and entropy draws, in the same per-lane order, from the same call sites.

Exits 0 when the trajectories agree and 3 at the first divergent step, with a diff of the two requests —
the check a replay suite runs after re-recording an agent whose prompt or code changed. Fingerprints are
recomputed from the stored requests, not trusted: a mismatch, an incomplete run (no session_end) or a
corrupt session exits 2; a path with no session at it exits 1.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			golden, err := openSession(args[0])
			if err != nil {
				return err
			}
			candidate, err := openSession(args[1])
			if err != nil {
				return err
			}
			d, err := replay.CompareSessions(golden, candidate, codec.ForProvider)
			if err != nil {
				return classify(err)
			}
			if output == "json" {
				result := map[string]any{"golden": golden.Meta.ID, "candidate": candidate.Meta.ID, "match": d == nil}
				if d != nil {
					result["divergedAtStep"], result["kind"], result["callSite"] = d.Step, d.Kind, d.CallSite
					result["expectedFingerprint"], result["actualFingerprint"], result["diff"], result["message"] = d.ExpectedFingerprint(), d.Fingerprint, d.Diff, d.Error()
				}
				if err := writeJSON(cmd.OutOrStdout(), result); err != nil {
					return err
				}
			} else if d == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "%s matches %s: the same boundary calls in the same order\n", printable(candidate.Meta.ID), printable(golden.Meta.ID))
			}
			if d != nil {
				return classify(d)
			}
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}
