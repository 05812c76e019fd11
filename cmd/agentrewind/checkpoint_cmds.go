package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// checkpointAuthor is who the CLI says minted a checkpoint. A person at a terminal is not the
// recorder, so a CLI checkpoint never anchors a rewind; only the recording proxy mints those.
const checkpointAuthor = session.AuthorAgent

// progressEvery is how many files a capture reports progress after.
const progressEvery = 1000

// classifyCheckpoint gives a checkpoint error its exit code: a manifest or blob that cannot be
// trusted is corruption (2), like a tampered session; anything else is an error (1).
func classifyCheckpoint(err error) error {
	if err == nil {
		return nil
	}
	if isType[*checkpoint.ManifestError](err) || isType[*checkpoint.TamperedError](err) || isType[*checkpoint.BlobHashError](err) {
		return &codedError{exitCorrupt, err}
	}
	return classify(storeAdvice(err))
}

// checkpointFlags are the flags the checkpoint verbs share: exactly one of --store-dir (a local
// directory) and --store (S3, with the store flags of push and pull).
type checkpointFlags struct {
	store    storeFlags
	storeDir string
	session  string
	// makeStore lets open create a --store-dir that does not exist yet: only create stores anything
	// new. The other verbs refuse a missing one, which a typo makes: a restore used to answer "no
	// checkpoint matches" and leave an empty store directory behind.
	makeStore bool
}

func (f *checkpointFlags) register(cmd *cobra.Command) {
	f.store.register(cmd, false)
	cmd.Flags().StringVar(&f.storeDir, "store-dir", "", "local directory holding checkpoints (checkpoints/<id>/manifest.json) and blobs (blobs/sha256/…), instead of --store")
	cmd.Flags().StringVar(&f.session, "session", "", "the session the checkpoints belong to")
}

// output is the --output format.
func (f *checkpointFlags) output() string { return f.store.output }

// context bounds a command by --timeout.
func (f *checkpointFlags) context(parent context.Context) (context.Context, context.CancelFunc) {
	return f.store.context(parent)
}

// open checks the shared flags and opens the store: the local directory of --store-dir, or the S3
// store of --store (default $AGENTREWIND_STORE when --store-dir is not given). With a workspace it
// also refuses a local store inside the workspace or the other way round, so a capture never reads
// its own output.
func (f *checkpointFlags) open(ctx context.Context, workspace string) (*checkpoint.Store, error) {
	if err := checkOutput(f.store.output); err != nil {
		return nil, err
	}
	if workspace != "" {
		fi, err := os.Stat(workspace)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("workspace %s is not a directory", workspace)
		}
	}
	switch {
	case f.storeDir != "" && f.store.store != "":
		return nil, errors.New("--store-dir and --store name two stores: pass one of them")
	case f.storeDir == "" && f.store.store == "" && os.Getenv(envStore) == "":
		return nil, fmt.Errorf("a store is required: pass --store-dir <dir> or --store s3://<bucket>/<prefix> (or set %s)", envStore)
	case f.storeDir == "":
		sessions, _, err := f.store.open(ctx, nil)
		if err != nil {
			return nil, err
		}
		return sessions.Checkpoints(), nil
	}
	if workspace != "" {
		// Checked before the store directory is made, so a refused store leaves nothing behind.
		ws, store := realPath(workspace), realPath(f.storeDir)
		if within(store, ws) || within(ws, store) || sameOrBelow(store, ws) || sameOrBelow(ws, store) || overlapThroughMounts(store, ws) {
			return nil, fmt.Errorf("the store %s and the workspace %s overlap: keep the store outside the workspace", f.storeDir, workspace)
		}
	}
	if f.makeStore {
		if err := os.MkdirAll(f.storeDir, 0o755); err != nil {
			return nil, err
		}
	} else if fi, err := os.Stat(f.storeDir); err != nil || !fi.IsDir() {
		if err == nil {
			err = errors.New("not a directory")
		}
		return nil, fmt.Errorf("--store-dir %s: %w: no checkpoint was ever stored there (create makes it)", f.storeDir, err)
	}
	return checkpoint.OpenStore(f.storeDir), nil
}

// realPath is p with every symbolic link resolved, for a path that may not exist yet: its deepest
// existing ancestor is resolved and the rest joined back on.
func realPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	rest := ""
	for cur := abs; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs
		}
		rest, cur = filepath.Join(filepath.Base(cur), rest), parent
	}
}

// sameOrBelow reports whether the directory dir is p or one of p's existing ancestors, compared by
// device and inode: a bind mount (or any other alias a path comparison cannot see through) of the
// workspace still names the same directory. p is a resolved path, so its parents are its real ones.
func sameOrBelow(p, dir string) bool {
	di, err := os.Stat(dir)
	if err != nil {
		return false
	}
	for cur := p; ; cur = filepath.Dir(cur) {
		if fi, err := os.Stat(cur); err == nil && os.SameFile(fi, di) {
			return true
		}
		if filepath.Dir(cur) == cur {
			return false
		}
	}
}

func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// newCheckpointCommand is `agentrewind checkpoint`.
func newCheckpointCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Capture, list, preview, restore and prune workspace checkpoints",
		Long: `Workspace checkpoints hold the files of an agent's workspace at a step, so they can be got back.

Checkpoints live in a local directory (--store-dir) or in the S3 session store (--store
s3://<bucket>/<prefix>, with the flags and credentials of push and pull; exactly one of them). File
contents are stored once, by SHA-256, under blobs/sha256 there: unchanged files cost nothing across
checkpoints, and in S3 a file identical to a session's blob is not uploaded again. Every blob and
manifest is hashed before it is stored and again when it is read back. Restore only overwrites: files created after a checkpoint are listed as
leftovers and left in place, and a guard checkpoint of the current files is taken first so a restore
can be undone by restoring the guard.

Addresses: an id prefix, "step N" (the nearest capture at or before step N) or "latest" (the newest
capture). A guard checkpoint is named only by its id.

Exit codes: 0 success, 1 error, 2 a checkpoint or blob is corrupt or was tampered with.`,
	}
	cmd.AddCommand(newCheckpointCreateCommand(), newCheckpointListCommand(), newCheckpointPreviewCommand(),
		newCheckpointRestoreCommand(), newCheckpointPruneCommand())
	return cmd
}

// resentNote says how many blobs a capture found stored and sent again all the same, or stored again
// after a blob sweep deleted them, so that a summary's "new bytes uploaded" is not taken for all it
// sent.
func resentNote(st checkpoint.CaptureStats) string {
	var note string
	if st.ResentBlobs > 0 {
		note = fmt.Sprintf("; %d blobs already stored were sent again (%d bytes) because the store cannot renew them in place",
			st.ResentBlobs, st.ResentBytes)
	}
	if st.StoredAgainBlobs > 0 {
		note += fmt.Sprintf("; %d blobs a blob sweep deleted while the capture ran were stored again", st.StoredAgainBlobs)
	}
	return note
}

func newCheckpointCreateCommand() *cobra.Command {
	var (
		f          checkpointFlags
		turn, step int64
		turnDigest string
		excludes   []string
		useGit     bool
	)
	cmd := &cobra.Command{
		Use:   "create <workspace> (--store-dir <dir> | --store s3://<bucket>/<prefix>)",
		Short: "Capture a workspace directory as a checkpoint",
		Long: `Capture a workspace directory as a checkpoint. Symbolic links are recorded with their target and
never followed, and no .git (a repository's own data) is ever captured, at any depth. Only files
whose size, mode, mtime, ctime or inode changed since the session's latest checkpoint are read again
(and those modified within 2 s of its capture, whose timestamps cannot tell a later write apart). With
--git, a git work tree is checkpointed the same way, tracked and untracked files and nested
repositories' files alike, with its bytes in the store: nothing is read from or written into the
repository. A capture identical to the session's latest checkpoint writes nothing and names that
checkpoint. --exclude takes globs: * and ? within a path segment, ** across segments; a pattern
without / matches a name at any depth, a trailing / only directories; a backslash escapes the next
character, as in gitignore (\* is a star, \\ a backslash).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd.Context())
			defer cancel()
			f.makeStore = true
			store, err := f.open(ctx, args[0])
			if err != nil {
				return err
			}
			opts := checkpoint.CaptureOptions{
				Anchor:   checkpoint.Anchor{Session: f.session, Turn: turn, Step: step, TurnDigest: turnDigest, Author: checkpointAuthor},
				Excludes: excludes,
				Progress: func(files int, bytes int64) {
					if files%progressEvery == 0 {
						fmt.Fprintf(cmd.ErrOrStderr(), "captured %d files, %d bytes\n", files, bytes)
					}
				},
			}
			create := store.Create
			if useGit {
				create = store.CreateGit
			}
			c, err := create(ctx, args[0], opts)
			if err != nil {
				return classifyCheckpoint(err)
			}
			if f.output() == "json" {
				return writeJSON(cmd.OutOrStdout(), c)
			}
			w := cmd.OutOrStdout()
			if !c.New {
				if c.Stats.ResentBlobs > 0 {
					_, err = fmt.Fprintf(w, "unchanged since checkpoint %s: no checkpoint written%s\n", c.ID, resentNote(c.Stats))
					return err
				}
				_, err = fmt.Fprintf(w, "unchanged since checkpoint %s: nothing written\n", c.ID)
				return err
			}
			_, err = fmt.Fprintf(w, "checkpoint %s: %d files, %d bytes, %d new bytes uploaded%s\n", c.ID, c.Stats.Files, c.Stats.Bytes, c.Stats.IncrementalBytes, resentNote(c.Stats))
			for _, s := range c.Stats.Skipped {
				fmt.Fprintf(cmd.ErrOrStderr(), "skipped %s: not a regular file, directory or symbolic link\n", printable(s))
			}
			for _, s := range c.Stats.Vanished {
				fmt.Fprintf(cmd.ErrOrStderr(), "skipped %s: it disappeared while the workspace was captured\n", printable(s))
			}
			for _, s := range c.Stats.RestoreTemporaries {
				fmt.Fprintf(cmd.ErrOrStderr(), "skipped %s: a temporary file left by an interrupted restore, safe to delete\n", printable(s))
			}
			for _, s := range c.Stats.Unrecordable {
				fmt.Fprintf(cmd.ErrOrStderr(), "left out %s: its name or link target is not valid UTF-8, which a checkpoint cannot record; a restore leaves it as it is (rename it to capture it)\n", printable(s))
			}
			return err
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&f.store.createBucket, "create-bucket", false, "with --store, create the bucket if it does not exist")
	cmd.Flags().Int64Var(&turn, "turn", 0, "the turn the checkpoint is taken at")
	cmd.Flags().Int64Var(&step, "step", 0, "the step the checkpoint is taken at")
	cmd.Flags().StringVar(&turnDigest, "turn-digest", "", "the transcript digest of that turn")
	cmd.Flags().StringArrayVar(&excludes, "exclude", nil, "glob of paths to leave out (repeatable)")
	cmd.Flags().BoolVar(&useGit, "git", false, "mark the checkpoint as one of a git work tree (reason \"git\"); a bare repository is refused. "+
		"Files go to the store as for any checkpoint: nothing is written into the repository")
	return cmd
}

func newCheckpointListCommand() *cobra.Command {
	var f checkpointFlags
	cmd := &cobra.Command{
		Use:   "list (--store-dir <dir> | --store s3://<bucket>/<prefix>)",
		Short: "List checkpoints, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := f.context(cmd.Context())
			defer cancel()
			store, err := f.open(ctx, "")
			if err != nil {
				return err
			}
			all, err := scanCheckpoints(ctx, store, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			list := inSession(all, f.session)
			if f.output() == "json" {
				return writeJSON(cmd.OutOrStdout(), list)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSESSION\tTURN\tSTEP\tREASON\tANCHORS REWIND\tFILES\tBYTES\tNEW BYTES\tCREATED")
			for _, s := range list {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%v\t%d\t%d\t%d\t%s\n", s.ID[:12], printableCell(dash(s.Anchor.Session)), s.Anchor.Turn, s.Anchor.Step,
					printableCell(s.Reason), s.Anchor.AnchorsRewind(), s.Files, s.Bytes, s.IncrementalBytes, s.CreatedAt.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
	f.register(cmd)
	return cmd
}

// inSession is the checkpoints of sessionID, or all of them when it is empty.
func inSession(all []checkpoint.Summary, sessionID string) []checkpoint.Summary {
	list := []checkpoint.Summary{}
	for _, s := range all {
		if sessionID == "" || s.Anchor.Session == sessionID {
			list = append(list, s)
		}
	}
	return list
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// scanCheckpoints summarises every checkpoint that loads; each one that does not is reported on
// stderr and skipped, so one damaged manifest never blocks the others.
func scanCheckpoints(ctx context.Context, store *checkpoint.Store, stderr io.Writer) ([]checkpoint.Summary, error) {
	list, bad, err := store.Scan(ctx)
	if err != nil {
		return nil, classifyCheckpoint(err)
	}
	for _, u := range bad {
		fmt.Fprintf(stderr, "warning: skipped checkpoint %s, its manifest does not load: %s\n", u.ID, printable(u.Err.Error()))
	}
	return list, nil
}

// resolveCheckpoint finds the checkpoint an address (the arguments after the workspace) names. An id
// prefix that names only a checkpoint that does not load fails with that checkpoint's error.
func resolveCheckpoint(ctx context.Context, store *checkpoint.Store, sessionID string, addr []string, stderr io.Writer) (checkpoint.Summary, error) {
	list, bad, err := store.Scan(ctx)
	if err != nil {
		return checkpoint.Summary{}, classifyCheckpoint(err)
	}
	s, err := checkpoint.Resolve(list, sessionID, strings.Join(addr, " "))
	if errors.Is(err, checkpoint.ErrNotFound) {
		prefix := strings.ToLower(strings.TrimSpace(strings.Join(addr, " ")))
		for _, u := range bad {
			if prefix != "" && strings.HasPrefix(u.ID, prefix) {
				return checkpoint.Summary{}, classifyCheckpoint(u.Err)
			}
		}
	}
	for _, u := range bad {
		fmt.Fprintf(stderr, "warning: skipped checkpoint %s, its manifest does not load: %s\n", u.ID, printable(u.Err.Error()))
	}
	return s, err
}

func newCheckpointPreviewCommand() *cobra.Command {
	var (
		f     checkpointFlags
		files []string
	)
	cmd := &cobra.Command{
		Use:   "preview <workspace> <id-prefix | step N | latest> (--store-dir <dir> | --store s3://<bucket>/<prefix>)",
		Short: "Show what a restore would overwrite and leave over, writing nothing",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := f.context(cmd.Context())
			defer cancel()
			store, target, err := f.openTarget(ctx, cmd, args, files)
			if err != nil {
				return err
			}
			p, err := store.Preview(ctx, args[0], target.ID, files)
			if err != nil {
				return classifyCheckpoint(restoreAdvice(err, args[0]))
			}
			if f.output() == "json" {
				return writeJSON(cmd.OutOrStdout(), p)
			}
			return printPreview(cmd.OutOrStdout(), "would", p)
		},
	}
	f.register(cmd)
	cmd.Flags().StringSliceVar(&files, "files", nil, "restore only these paths (comma-separated); a path the checkpoint lacks is an error")
	return cmd
}

// checkFiles refuses a --files that names no path: an empty list would silently mean every file.
// openTarget is the prologue preview and restore share: check --files, open the store for the
// workspace args[0] and resolve the address in args[1:].
func (f *checkpointFlags) openTarget(ctx context.Context, cmd *cobra.Command, args, files []string) (*checkpoint.Store, checkpoint.Summary, error) {
	if err := checkFiles(cmd, files); err != nil {
		return nil, checkpoint.Summary{}, err
	}
	store, err := f.open(ctx, args[0])
	if err != nil {
		return nil, checkpoint.Summary{}, err
	}
	target, err := resolveCheckpoint(ctx, store, f.session, args[1:], cmd.ErrOrStderr())
	return store, target, err
}

// restoreAdvice adds what to do about a restore the workspace refused, naming the path to act on.
func restoreAdvice(err error, workspace string) error {
	if ue, ok := errors.AsType[*checkpoint.UnwritableError](err); ok {
		if ae, ok := errors.AsType[*checkpoint.AttributeError](err); ok {
			return fmt.Errorf("%w: if the workspace may be changed, clear the attribute with `chattr -%s %q` (as root) and restore again",
				err, ae.Attribute.Letter(), filepath.Join(workspace, filepath.FromSlash(ue.At)))
		}
	}
	if ns, ok := errors.AsType[*checkpoint.NoSpaceError](err); ok && !ns.Inodes {
		return fmt.Errorf("%w: free %d bytes there, or restore fewer files with --files", err, ns.Need-ns.Available)
	}
	return err
}

func checkFiles(cmd *cobra.Command, files []string) error {
	if cmd.Flags().Changed("files") && len(files) == 0 {
		return errors.New("--files names no path: pass the paths to restore, or leave --files out to restore every file")
	}
	return nil
}

func printPreview(w io.Writer, verb string, p checkpoint.Preview) error {
	fmt.Fprintf(w, "checkpoint %s: %s overwrite %d, create %d, leave %d unchanged (%d bytes)\n", p.ID, verb,
		p.Count(checkpoint.ActionOverwrite), p.Count(checkpoint.ActionCreate), p.Count(checkpoint.ActionUnchanged), p.Bytes)
	for _, c := range p.Changes {
		switch c.Action {
		case checkpoint.ActionOverwrite:
			fmt.Fprintf(w, "  overwrite %s (%d -> %d bytes)\n", printable(c.Path), c.CurrentSize, c.Size)
		case checkpoint.ActionCreate:
			fmt.Fprintf(w, "  create    %s (%d bytes)\n", printable(c.Path), c.Size)
		}
	}
	for _, l := range p.Leftovers {
		fmt.Fprintf(w, "  leftover  %s (not in the checkpoint, left in place)\n", printable(l))
	}
	return nil
}

func newCheckpointRestoreCommand() *cobra.Command {
	var (
		f     checkpointFlags
		files []string
		guard string
	)
	cmd := &cobra.Command{
		Use:   "restore <workspace> <id-prefix | step N | latest> (--store-dir <dir> | --store s3://<bucket>/<prefix>)",
		Short: "Write a checkpoint's files back into a workspace (overwrite only, behind a guard checkpoint)",
		Long: `Write a checkpoint's files back into a workspace. Nothing is deleted: files created after the
checkpoint are listed as leftovers. Every path and blob is checked, and so is that the workspace will
accept every write (no read-only file system, immutable or append-only file, or full disk halfway:
the free space of each file system written to must hold every file written whole, and a guard stored
there), before anything is written;
a restore never writes through a symbolic link. Before writing, a guard checkpoint of the current files
is taken (--guard warn: restore anyway if it fails; require: refuse; off: none); restoring the guard
undoes the restore. A restore is refused while another restore or a capture of the workspace runs,
and a capture while a restore runs.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := checkpoint.ParseGuardMode(guard)
			if err != nil {
				return err
			}
			ctx, cancel := f.context(cmd.Context())
			defer cancel()
			store, target, err := f.openTarget(ctx, cmd, args, files)
			if err != nil {
				return err
			}
			// The guard sits where the session is now: at its latest checkpoint's turn and step.
			anchor := checkpoint.Anchor{Session: f.session, Author: checkpointAuthor}
			if latest, err := resolveCheckpoint(ctx, store, f.session, []string{"latest"}, io.Discard); err == nil {
				anchor.Turn, anchor.Step = latest.Anchor.Turn, latest.Anchor.Step
			}
			res, err := store.Restore(ctx, args[0], target.ID, checkpoint.RestoreOptions{Files: files, Guard: mode, GuardAnchor: anchor})
			if err != nil {
				return classifyCheckpoint(restoreAdvice(err, args[0]))
			}
			if f.output() == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			if err := printPreview(w, "did", res.Preview); err != nil {
				return err
			}
			switch {
			case res.Guard != "":
				fmt.Fprintf(w, "guard checkpoint %s: restore it to undo this restore\n", res.Guard)
				for _, o := range res.GuardOmitted {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: the guard leaves out %s, whose name or link target a manifest cannot record; this restore did not touch it\n", printable(o))
				}
			case res.GuardWarning != "":
				fmt.Fprintf(cmd.ErrOrStderr(), "WARNING: NO GUARD CHECKPOINT WAS TAKEN: this restore cannot be undone (--guard require refuses instead): %s\n", printable(res.GuardWarning))
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringSliceVar(&files, "files", nil, "restore only these paths (comma-separated); a path the checkpoint lacks is an error")
	cmd.Flags().StringVar(&guard, "guard", "warn", "guard checkpoint before restoring: warn, require or off")
	return cmd
}

func newCheckpointPruneCommand() *cobra.Command {
	var (
		f         checkpointFlags
		policy    checkpoint.PrunePolicy
		dryRun    bool
		workspace string
	)
	cmd := &cobra.Command{
		Use:   "prune (--store-dir <dir> | --store s3://<bucket>/<prefix>) [--session S] [--keep N] [--max-bytes N]",
		Short: "Delete old checkpoints: keep N per session and bound their new bytes",
		Long: `Delete old checkpoints: each session keeps its newest --keep captures and, apart from them, its
newest --keep guards; then guards, oldest first, and after them the oldest captures go until the bytes
the kept checkpoints added fit --max-bytes. The newest capture of a session is never deleted.
With --session, only that session's checkpoints are planned and deleted (and --max-bytes bounds
theirs alone). Each deletion names the rule that caused it. Blobs stay until the blob sweep finds them unreferenced.
A git checkpoint written by an earlier version is a commit in its repository, kept from git gc by a
ref refs/agentrewind/checkpoints/<commit>: with --workspace <its work tree> the refs of the pruned
ones are deleted there; without it they stay, and the git commands that delete them are printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := f.context(cmd.Context())
			defer cancel()
			store, err := f.open(ctx, "")
			if err != nil {
				return err
			}
			if policy.KeepPerSession < 0 || policy.MaxBytes < 0 {
				return errors.New("--keep and --max-bytes must not be negative")
			}
			all, err := scanCheckpoints(ctx, store, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			list := inSession(all, f.session)
			plan := checkpoint.Prune(list, policy)
			gone := map[string]bool{}
			for _, d := range plan.Delete {
				gone[d.ID] = true
			}
			var kept []checkpoint.Summary
			for _, s := range all {
				if !gone[s.ID] {
					kept = append(kept, s)
				}
			}
			refs := checkpoint.GitRefsToDrop(plan.Delete, kept)
			// Which refs the --workspace repository holds is asked before anything is deleted: a
			// --workspace that is no git work tree used to fail after the checkpoints were gone,
			// and one of another repository "deleted" refs it never held.
			var refsHere []string // the refs deleted in the --workspace repository
			refsLeft := refs      // the refs that stay
			if workspace != "" {
				refsLeft = nil
				for _, c := range refs {
					held, err := checkpoint.HasGitRef(workspace, c)
					if err != nil {
						return classifyCheckpoint(fmt.Errorf("--workspace: %w (nothing was deleted)", err))
					}
					if held {
						refsHere = append(refsHere, c)
					} else {
						refsLeft = append(refsLeft, c)
					}
				}
			}
			if !dryRun {
				for i, d := range plan.Delete {
					if err := store.Delete(ctx, d.ID); err != nil {
						return fmt.Errorf("deleting checkpoint %s (%d of %d already deleted): %w", d.ID, i, len(plan.Delete), err)
					}
				}
				for i, c := range refsHere {
					if err := checkpoint.DropGitRef(workspace, c); err != nil {
						return classifyCheckpoint(fmt.Errorf("the %d checkpoints were deleted, and %d of the %d git refs: %w", len(plan.Delete), i, len(refsHere), err))
					}
				}
			}
			if f.output() == "json" {
				return writeJSON(cmd.OutOrStdout(), struct {
					checkpoint.PrunePlan
					DryRun bool `json:"dryRun"`
					// GitRefs are the refs of pruned git checkpoints that no kept one needs;
					// GitRefsLeft those of them still in their repository (no --workspace, or not in its repository).
					GitRefs     []string `json:"gitRefs,omitempty"`
					GitRefsLeft []string `json:"gitRefsLeft,omitempty"`
				}{plan, dryRun, gitRefNames(refs), gitRefNames(refsLeft)})
			}
			w := cmd.OutOrStdout()
			verb := "deleted"
			if dryRun {
				verb = "would delete"
			}
			for _, d := range plan.Delete {
				kind := "capture"
				if d.Guard {
					kind = "guard"
				}
				fmt.Fprintf(w, "%s %s (%s, session %s, %d new bytes): rule %s\n", verb, d.ID[:12], kind, printable(dash(d.Session)), d.IncrementalBytes, d.Rule)
			}
			fmt.Fprintf(w, "%d checkpoints %s, %d new bytes kept\n", len(plan.Delete), verb, plan.KeptBytes)
			if workspace != "" {
				for _, r := range gitRefNames(refsHere) {
					fmt.Fprintf(w, "%s git ref %s in %s\n", verb, r, printable(workspace))
				}
			}
			switch {
			case len(refsLeft) > 0 && workspace != "":
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: the repository of %s does not hold the refs of %d pruned git checkpoints, which stay in their own "+
					"repository and keep the commits from git gc (is %s their work tree?); prune with --workspace <their work tree>, or in it run:\n",
					printable(workspace), len(refsLeft), printable(workspace))
			case len(refsLeft) > 0 && !dryRun:
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: the refs of %d pruned git checkpoints stay in their repository and keep the commits from git gc; "+
					"prune with --workspace <their work tree>, or in it run:\n", len(refsLeft))
			}
			if len(refsLeft) > 0 && (!dryRun || workspace != "") {
				for _, r := range gitRefNames(refsLeft) {
					fmt.Fprintf(cmd.ErrOrStderr(), "  git update-ref -d %s\n", r)
				}
			}
			if plan.OverQuota {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: the newest checkpoints alone hold %d bytes, over --max-bytes %d; they are kept\n", plan.KeptBytes, policy.MaxBytes)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&policy.KeepPerSession, "keep", 0, "captures, and apart from them guards, kept per session (0: no limit)")
	cmd.Flags().Int64Var(&policy.MaxBytes, "max-bytes", 0, "bound on the new bytes of the kept checkpoints (0: no bound)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan without deleting")
	cmd.Flags().StringVar(&workspace, "workspace", "", "the git work tree of the pruned git checkpoints: their refs under refs/agentrewind/checkpoints/ are deleted there")
	return cmd
}

// gitRefNames are the refs that keep git checkpoint commits from git gc.
func gitRefNames(commits []string) []string {
	var out []string
	for _, c := range commits {
		out = append(out, checkpoint.GitRefPrefix+c)
	}
	return out
}
