package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/checkpoint"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/task"
)

// defaultTerminationLog is where the kubelet reads a container's termination message from.
const defaultTerminationLog = "/dev/termination-log"

// newEngineCommand is the parent of the tasks the operator's Jobs run.
func newEngineCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "engine <task>",
		Short: "Run one of the tasks the operator's Jobs run (verify, resume-plan, checkpoint, replay, fork, gc-sweep)",
		Long: `Run one of the tasks the operator's Jobs run. In a Job, a task reads its session from the store
(--store, --session-id), writes its result to results/<job-uid>.json there and a summary of at most
4 KiB to the termination message; the controller reads both. A task that ran and found a problem (a
corrupt session) succeeded as a task and exits 0: its result says what it found. A task that could not
do its job exits non-zero and its result says why.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newVerifyTaskCommand(), newResumePlanTaskCommand(), newCheckpointTaskCommand(),
		newEngineProxyTaskCommand("replay"), newEngineProxyTaskCommand("fork"), newGCSweepTaskCommand())
	return cmd
}

// jobFlags are what every engine task run by a Job shares: the store, the session and the Job.
type jobFlags struct {
	storeFlags
	sessionID, jobUID, terminationLog string
}

func (f *jobFlags) register(cmd *cobra.Command) {
	f.storeFlags.register(cmd, false)
	cmd.Flags().StringVar(&f.sessionID, "session-id", "", "the session to read from the store")
	cmd.Flags().StringVar(&f.jobUID, "job-uid", "", "the Job's UID, naming its result object results/<uid>.json (default $JOB_UID)")
	cmd.Flags().StringVar(&f.terminationLog, "termination-log", defaultTerminationLog,
		"where the summary for the controller goes; written only when the file exists, as the kubelet creates it")
}

// jobRun is one engine task run: it pulls the session, lets the task fill the result, and reports.
type jobRun struct {
	flags  *jobFlags
	store  *blobstore.SessionStore
	result *task.Result
}

// runJob runs one task against a session pulled from the store. do fills the task's payload of res
// from the verified session directory; pulled is the pull's error about the session's bytes, which
// verify reports as a finding and the other tasks as a failure.
func runJob(cmd *cobra.Command, f *jobFlags, name task.Name, do func(ctx context.Context, dir string, pulled error, res *task.Result) error) error {
	return runStoreJob(cmd, f, name, func(ctx context.Context, store *blobstore.SessionStore, res *task.Result) error {
		tmp, err := os.MkdirTemp("", "agentrewind-"+string(name)+"-*")
		if err != nil {
			return &failure{task.ReasonInternal, fmt.Errorf("making a working directory (set TMPDIR to a writable one): %w", err)}
		}
		defer os.RemoveAll(tmp)
		dir := filepath.Join(tmp, "session")
		_, pulled := store.Pull(ctx, f.sessionID, dir)
		if pulled != nil && !isCorrupt(pulled) {
			reason := task.ReasonStorageUnavailable
			if errors.Is(pulled, blobstore.ErrSessionNotFound) {
				reason = task.ReasonSessionNotFound
			}
			return &failure{reason, pulled}
		}
		return do(ctx, dir, pulled, res)
	})
}

// runStoreJob runs one task that uses the store as it needs (runJob pulls a session first). do fills
// the task's payload of res; an error it returns fails the task with the reason of a *failure, else
// SessionCorrupt for corruption, else Internal.
func runStoreJob(cmd *cobra.Command, f *jobFlags, name task.Name, do func(ctx context.Context, store *blobstore.SessionStore, res *task.Result) error) error {
	if f.jobUID == "" {
		f.jobUID = os.Getenv("JOB_UID")
	}
	if f.sessionID == "" || f.jobUID == "" {
		return errors.New("--session-id and --job-uid (or $JOB_UID) are required: the result is written to results/<job-uid>.json")
	}
	if err := blobstore.ValidateID(f.jobUID); err != nil {
		return fmt.Errorf("--job-uid: %w", err)
	}
	ctx, cancel := f.context(cmd.Context())
	defer cancel()
	run := &jobRun{flags: f, result: &task.Result{APIVersion: task.APIVersion, Task: name, JobUID: f.jobUID, StartedAt: time.Now().UTC()}}
	store, _, err := f.open(ctx, nil)
	if err != nil {
		return run.finish(cmd, task.ReasonStorageUnavailable, err)
	}
	run.store = store
	if err := do(ctx, store, run.result); err != nil {
		reason := task.ReasonInternal
		if isCorrupt(err) {
			reason = task.ReasonSessionCorrupt
		}
		var fe *failure
		if errors.As(err, &fe) {
			reason = fe.reason
		}
		return run.finish(cmd, reason, err)
	}
	return run.finish(cmd, "", nil)
}

// failure is a task error with the reason the controller will see.
type failure struct {
	reason task.FailureReason
	err    error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// finish writes the result to the store and the termination message, prints the summary, and returns
// the task's own error (nil when it succeeded).
func (r *jobRun) finish(cmd *cobra.Command, reason task.FailureReason, taskErr error) error {
	res := r.result
	res.FinishedAt = time.Now().UTC()
	res.Outcome = task.Succeeded
	if taskErr != nil {
		res.Outcome, res.Failure = task.Failed, &task.Failure{Reason: reason, Message: taskErr.Error()}
	}
	summary := task.TerminationMessage(res)
	if r.flags.terminationLog != "" {
		if _, err := os.Stat(r.flags.terminationLog); err == nil {
			if err := os.WriteFile(r.flags.terminationLog, summary, 0o644); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: writing the termination message to %s: %v\n", r.flags.terminationLog, err)
			}
		}
	}
	if r.store != nil {
		data, err := task.Encode(res)
		if err == nil {
			err = r.store.PutResult(context.WithoutCancel(cmd.Context()), r.flags.jobUID, data)
		}
		if err != nil {
			return errors.Join(taskErr, fmt.Errorf("the result could not be stored: %w", err))
		}
	}
	fmt.Fprintln(cmd.OutOrStdout(), string(summary))
	return classify(taskErr)
}

func newVerifyTaskCommand() *cobra.Command {
	var f jobFlags
	cmd := &cobra.Command{
		Use:   "verify --store S --session-id ID --job-uid UID",
		Short: "Pull a session from the store, verify every byte and its structure, and count what it holds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runJob(cmd, &f, task.Verify, func(_ context.Context, dir string, pulled error, res *task.Result) error {
				res.Verify = &task.VerifyResult{SessionID: f.sessionID, Redactions: []task.PatternCount{}}
				if pulled != nil {
					res.Verify.Problem, res.Verify.ProblemKind = pulled.Error(), task.ProblemKindOf(pulled) // a finding: the task did its job
					return nil
				}
				return describeSession(dir, res.Verify)
			})
		},
	}
	f.register(cmd)
	return cmd
}

// describeSession fills a verify result from a pulled session: opened with every check, then counted,
// with the anchors the recorder minted in it (never the agent's look-alikes).
func describeSession(dir string, v *task.VerifyResult) error {
	s, err := session.Open(dir)
	if err != nil {
		v.Problem, v.ProblemKind = err.Error(), task.ProblemKindOf(err)
		return nil
	}
	v.Intact = true
	v.Ended = s.CheckComplete() == nil
	m := s.Meta
	v.SchemaVersion, v.EventsHash, v.Events = m.SchemaVersion, m.EventsHash, int64(len(s.Events))
	for _, ev := range s.Events {
		v.Steps = max(v.Steps, ev.Step+1)
		switch ev.Kind {
		case session.KindModelCall:
			v.ModelCalls++
		case session.KindToolCall:
			v.ToolCalls++
		}
	}
	v.Usage = task.UsageOfEvents(s.Events, nil)
	v.Anchors, v.TotalAnchors = task.MintedAnchors(s.Events)
	entries, err := os.ReadDir(filepath.Join(dir, session.BlobsDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	inherited := inheritedBlobs(s)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			v.Blobs++
			v.Bytes += info.Size()
			if !inherited[e.Name()] {
				v.AddedBytes += info.Size()
			}
		}
	}
	// Bytes is the session's stored size: the blobs it references, and its log, meta.json and vault.
	for _, name := range []string{session.MetaFile, session.EventsFile, session.VaultFile} {
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil && info.Mode().IsRegular() {
			v.Bytes += info.Size()
			v.AddedBytes += info.Size()
		}
	}
	for name, n := range m.Redaction.Counts {
		v.Redactions = append(v.Redactions, task.PatternCount{Pattern: name, Count: int64(n)})
	}
	slices.SortFunc(v.Redactions, func(a, b task.PatternCount) int { return strings.Compare(a.Pattern, b.Pattern) })
	_, err = os.Stat(filepath.Join(dir, session.VaultFile))
	v.Vault = err == nil
	return nil
}

// inheritedBlobs is the set of blobs a fork's inherited steps reference: its parent's lines hold
// them, so the store keeps them for the parent already. Empty for a session that is not a fork.
func inheritedBlobs(s *session.Session) map[string]bool {
	if s.Meta.Parent == "" || len(s.Meta.InheritedSteps) == 0 {
		return nil
	}
	var lines []session.Event
	for _, ev := range s.Events {
		if s.Meta.Inherited(ev.Step) {
			lines = append(lines, ev)
		}
	}
	set := map[string]bool{}
	for _, h := range session.Blobs(lines) {
		set[h] = true
	}
	return set
}

// jobCheckpointAuthor is who a checkpoint taken by an engine Job is minted by. The Job runs for a
// Checkpoint, which the rewind proxy mints and the agent cannot, so it may anchor a rewind.
const jobCheckpointAuthor = session.AuthorRecorder

func newCheckpointTaskCommand() *cobra.Command {
	var (
		f                     jobFlags
		workspace, turnDigest string
		turn, step            int64
		excludes              []string
	)
	cmd := &cobra.Command{
		Use:   "checkpoint --store S --workspace DIR --session-id ID --job-uid UID [--step N --turn N --turn-digest D]",
		Short: "Capture a workspace directory as a checkpoint in the store, anchored in a session",
		Long: `Capture a workspace directory as a checkpoint in the store: file contents under blobs/ (shared with
sessions: only bytes the store does not hold yet are uploaded), the manifest under
checkpoints/<id>/manifest.json. A capture identical to the session's latest checkpoint writes
nothing and names that checkpoint (deduplicated). The session is not read: --session-id anchors the
checkpoint.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStoreJob(cmd, &f, task.Checkpoint, func(ctx context.Context, store *blobstore.SessionStore, res *task.Result) error {
				anchor := checkpoint.Anchor{Session: f.sessionID, Turn: turn, Step: step, TurnDigest: turnDigest, Author: jobCheckpointAuthor}
				if err := checkCheckpointInput(workspace, anchor); err != nil {
					return &failure{task.ReasonInvalidInput, err}
				}
				c, err := store.Checkpoints().Create(ctx, workspace, checkpoint.CaptureOptions{Anchor: anchor, Excludes: excludes})
				if err != nil {
					return checkpointTaskError(err)
				}
				res.Checkpoint = &task.CheckpointResult{CheckpointID: c.ID, SessionID: f.sessionID, ManifestHash: c.ID,
					Files: int64(c.Stats.Files), Bytes: c.Stats.Bytes, IncrementalBytes: c.Stats.IncrementalBytes, Deduplicated: !c.New}
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&workspace, "workspace", "", "the workspace directory to capture")
	cmd.Flags().Int64Var(&turn, "turn", 0, "the turn the checkpoint anchors")
	cmd.Flags().Int64Var(&step, "step", 0, "the step the checkpoint is taken at")
	cmd.Flags().StringVar(&turnDigest, "turn-digest", "", "the transcript digest of that turn (64 lowercase hex characters)")
	cmd.Flags().StringArrayVar(&excludes, "exclude", nil, "glob of paths to leave out (repeatable)")
	return cmd
}

// checkCheckpointInput checks what a checkpoint Job was asked to capture; a failure cannot be fixed
// by running the same Job again.
func checkCheckpointInput(workspace string, a checkpoint.Anchor) error {
	if workspace == "" {
		return errors.New("--workspace is required")
	}
	if fi, err := os.Stat(workspace); err != nil || !fi.IsDir() {
		return fmt.Errorf("--workspace %s is not a directory", workspace)
	}
	if a.Turn < 0 || a.Step < 0 {
		return errors.New("--turn and --step must not be negative")
	}
	if a.TurnDigest != "" && !session.ValidBlobHash(a.TurnDigest) {
		return fmt.Errorf("--turn-digest %q is not a SHA-256 digest of 64 lowercase hex characters", a.TurnDigest)
	}
	return nil
}

// checkpointTaskError gives a failed capture its reason: the store could not be reached, or anything
// else (a file that changed while it was read, an unreadable workspace) is Internal and retried.
func checkpointTaskError(err error) error {
	var op *blobstore.OpError
	if errors.As(err, &op) || errors.Is(err, blobstore.ErrBucketNotFound) {
		return &failure{task.ReasonStorageUnavailable, err}
	}
	return err
}
