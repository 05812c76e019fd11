package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/engine/bundle"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fsutil"
)

func newPackCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "pack <session-dir> <out.rewind>",
		Short: "Pack a session into a shareable .rewind bundle (never including its vault)",
		Long: `Pack a verified session into a .rewind bundle: meta.json, events.jsonl and blobs, never vault.enc.

Before writing, pack prints what was redacted, by pattern, so you know what the bundle does not reveal.
Secrets the patterns did not recognise are not redacted: read the summary before you share the file.

The bundle may not be written inside the session directory, nor over one of its files through a
symbolic or hard link, nor over a directory; an existing file is replaced only once the new bundle is
complete. The bundle is written to .<out.rewind>.tmp-* beside it and renamed into place; the ones a
killed pack into the same file left (their process is gone, or they are a day old) are removed. A
symbolic link is followed. A character device or FIFO (/dev/stdout, a named pipe) is written into,
never replaced, and the summary then goes to stderr: "pack S /dev/stdout > b.rewind" holds the bundle
alone.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, out := args[0], args[1]
			if err := checkOutput(output); err != nil {
				return err
			}
			if err := fsutil.CheckOutputOutside(out, dir); err != nil {
				return err
			}
			s, err := openSession(dir)
			if err != nil {
				return err
			}
			// A crashed run is worth sharing, so it is packed, but the receiver should know.
			warnIfIncomplete(cmd.ErrOrStderr(), s)
			// Written into /dev/stdout, the bundle must not have the summary printed after it.
			msgs := cmd.OutOrStdout()
			if fsutil.IsStreamOutput(out) {
				msgs = cmd.ErrOrStderr()
			}
			if output == "text" {
				printRedactionSummary(msgs, s.Meta.Redaction)
			}
			summary, err := packTo(cmd, dir, out)
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(msgs, map[string]any{"bundle": out, "session": s.Meta.ID,
					"redacted": s.Meta.Redaction.Counts, "summary": summary})
			}
			fmt.Fprintf(msgs, "wrote %s: %d files, %d blobs, %d bytes packed (vault.enc left out)\n",
				out, summary.Files, summary.Blobs, summary.Bytes)
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func printRedactionSummary(out io.Writer, r session.RedactionInfo) {
	if len(r.Counts) == 0 {
		fmt.Fprintln(out, "redaction: no secrets matched the recording's patterns")
		return
	}
	names := make([]string, 0, len(r.Counts))
	for name := range r.Counts {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintln(out, "redaction summary (secrets replaced by tokens, by pattern):")
	for _, name := range names {
		fmt.Fprintf(out, "  %-24s %d\n", name, r.Counts[name])
	}
}

// packTo writes the bundle atomically: a failed pack never leaves a truncated bundle under the
// requested name, nor replaces a file that was there.
func packTo(cmd *cobra.Command, dir, out string) (*bundle.PackSummary, error) {
	var summary *bundle.PackSummary
	err := fsutil.WriteFileAtomic(out, 0o644, func(w io.Writer) error {
		var err error
		summary, err = bundle.Pack(cmd.Context(), dir, w)
		return err
	})
	if err != nil {
		return nil, classify(err)
	}
	return summary, nil
}

func newUnpackCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "unpack <bundle.rewind> <dir>",
		Short: "Unpack a .rewind bundle into an empty directory and verify the session",
		Long: `Unpack a .rewind bundle into an empty directory and verify the session in it.

Bundles come from other people: entries that are links, devices, outside the session layout, escape
the directory, or do not match their hash are refused; the session is extracted into .<dir>.unpack-*
beside the directory and moved into place only once it verifies, so nothing is left behind on failure
(the ones a killed unpack into the same directory left are removed). <dir> may not be a file or a
symbolic link. Blobs no event references are dropped, with a warning.

Exit codes: 2 when the bundle is hostile or damaged or its session does not verify; 1 when <dir>
cannot take it (not empty, a file, a link) or for any other failure.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			summary, err := bundle.Unpack(cmd.Context(), f, args[1], bundle.Limits{})
			if err != nil {
				var de *bundle.DestinationError
				if ctx := cmd.Context(); errors.As(err, &de) || (ctx != nil && ctx.Err() != nil) {
					return err // the destination (not empty, a file, a link) or the user, not the bundle
				}
				return &codedError{exitCorrupt, err} // a hostile or damaged bundle, or a session that does not verify
			}
			for _, tmp := range summary.RemovedStale {
				fmt.Fprintf(cmd.ErrOrStderr(), "removed %s, left by an unpack into %s that did not finish\n", tmp, args[1])
			}
			s, err := openSession(args[1])
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"session": s.Meta.ID, "dir": args[1], "events": len(s.Events), "summary": summary})
			}
			if summary.Unreferenced > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: dropped %d blob(s) (%d bytes) that no event references\n", summary.Unreferenced, summary.UnreferencedBytes)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "unpacked session %s into %s: %d events, %d blobs, verified\n", s.Meta.ID, args[1], len(s.Events), summary.Blobs)
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}
