package replay

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"

	"github.com/agentrewind/agentrewind/internal/engine/evidence"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// MinDeclaredSecretLen is the shortest declared secret a recording accepts: a shorter value would be
// redacted out of ordinary text everywhere it occurs, and a secret that short protects nothing anyway.
const MinDeclaredSecretLen = 4

// prepare is what the recorder learns before the harness runs: the declared secrets, the credential-
// like values of its environment (an agent may read them with os.Getenv and send them on, never
// telling us), and the commit the run starts from. A recording reads it from the workspace; a replay
// or a fork of a recording (from) mints the recorded START again, so its steps line up with the
// recording's step for step.
func (r *runner) prepare(from *session.Session) error {
	for i, v := range r.cfg.Secrets {
		if len(v) < MinDeclaredSecretLen {
			return fmt.Errorf("declared secret #%d is %d bytes; secrets shorter than %d bytes cannot be redacted "+
				"without redacting ordinary text", i+1, len(v), MinDeclaredSecretLen)
		}
		r.cfg.Redactor.AddLiteral("declared-secret", v)
	}
	for _, kv := range r.cfg.Environ() {
		// A URL with credentials (DATABASE_URL=postgres://app:pw@db/app) is secret whatever its name.
		for _, c := range redact.CredentialsInValue(kv) {
			r.cfg.Redactor.AddLiteral("env-secret", c)
		}
		if k, v, ok := strings.Cut(kv, "="); ok && secretEnvName.MatchString(k) && len(v) >= minEnvSecretLen {
			r.cfg.Redactor.AddLiteral("env-secret", v)
		}
	}
	if from != nil {
		r.startSHA = ledger.Fold(from.Events).MintedStart()
		return nil
	}
	if r.cfg.Workspace != "" {
		head, err := workspaceHead(r.cfg.Workspace)
		if err != nil {
			return fmt.Errorf("reading the commit the run starts from: %w", err)
		}
		r.startSHA = head
	} else {
		r.startSHA = r.cfg.WorkspaceHead
	}
	return nil
}

func workspaceHead(dir string) (string, error) {
	ws, err := evidence.OpenGit(dir, "")
	if err != nil {
		return "", err
	}
	return ws.Head(), nil
}

// mintStart records the recorder's START: the workspace HEAD the run began at, OS_RECORDED, so the
// verdicts measure the run's work from a commit the agent did not name.
func (r *runner) mintStart(ctx context.Context) {
	if r.startSHA == "" {
		return
	}
	c := r.begin(ctx, session.KindLedger, nil, "recorder")
	ev := r.event(c, session.KindLedger)
	ev.Author, ev.Ledger = session.AuthorRecorder, ledger.Start(r.startSHA).JSON()
	r.finish(&ev)
}

// Anchor implements AgentContext. It mints the same stamp as Suspend (see there) as an ANCHOR record,
// which parks nothing: the run goes on, and a rewind may return to the stamped turn.
func (r *runner) Anchor(ctx context.Context) error {
	return r.stampTurn(ctx, func(turn int, digest string) (ledger.Record, error) {
		return ledger.Anchor(turn, digest), nil
	})
}

// stampTurn records the recorder's stamp of the latest turn, as record builds it from the turn's
// index and digest. An error from record records nothing.
func (r *runner) stampTurn(ctx context.Context, record func(turn int, digest string) (ledger.Record, error)) error {
	c := r.begin(ctx, session.KindLedger, nil, "recorder")
	r.mu.Lock()
	turn, digest := latestTurn(r.events)
	r.mu.Unlock()
	rec, err := record(turn, digest)
	if err != nil {
		r.skip(c.step)
		return err
	}
	ev := r.event(c, session.KindLedger)
	ev.Author, ev.Ledger = session.AuthorRecorder, rec.JSON()
	r.finish(&ev)
	return nil
}

// mintEnd records the recorder's END: how the run ended, from what the harness returned (or what
// Config.RunEnd makes of it). The agent cannot write it, so a crashed run cannot call itself finished.
func (r *runner) mintEnd(ctx context.Context, harnessErr error) {
	if r.noEnd {
		return
	}
	end := EndOf(harnessErr)
	if r.cfg.RunEnd != nil {
		end = r.cfg.RunEnd(harnessErr)
	}
	c := r.begin(ctx, session.KindLedger, nil, "recorder")
	ev := r.event(c, session.KindLedger)
	ev.Author, ev.Ledger = session.AuthorRecorder, ledger.End(end).JSON()
	r.finish(&ev)
}

// mintsEnd says whether events hold an END the recorder minted. A replay mints one only then, so it
// lines up step for step with recordings made before the recorder wrote an END.
func mintsEnd(events []session.Event) bool {
	for _, ev := range events {
		if ev.Kind != session.KindLedger || ev.Author != session.AuthorRecorder {
			continue
		}
		if rec, d := ledger.Decode(ev.Ledger); (d == ledger.DamageNone || d == ledger.DamageUntagged) && rec.Op == ledger.OpEnd {
			return true
		}
	}
	return false
}

// EndOf reads how a run ended from what its harness returned: nil is a finished run, a deadline is a
// deadline, a cancelled context or a process killed by a signal is a killed run, and any other error
// (a non-zero exit status, a panic, a halted fork) is a failed one.
func EndOf(harnessErr error) ledger.RunEnd {
	var exit *exec.ExitError
	switch {
	case harnessErr == nil:
		return ledger.RunEnd{How: ledger.EndFinished}
	case errors.Is(harnessErr, context.DeadlineExceeded):
		return ledger.RunEnd{How: ledger.EndDeadline}
	case errors.Is(harnessErr, context.Canceled):
		return ledger.RunEnd{How: ledger.EndKilled}
	case errors.As(harnessErr, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ledger.RunEnd{How: ledger.EndKilled, Signal: ws.Signal().String()}
		}
		code := exit.ExitCode()
		return ledger.RunEnd{How: ledger.EndFailed, ExitCode: &code}
	}
	return ledger.RunEnd{How: ledger.EndFailed}
}

// Suspend implements AgentContext. The stamp is the recorder's: the index of the latest model call it
// recorded, the digest of the transcript that call sent (evidence.TurnDigest, the function the
// verdicts recompute it with) and the workspace HEAD as the resume SHA. A model call still in flight
// when Suspend is called is not the stamped turn; if it lands before the stamp in the log, the turn's
// index no longer digests to the stamp and the rewind verdict says UNANCHORED — it fails closed.
func (r *runner) Suspend(ctx context.Context) error {
	return r.stampTurn(ctx, func(turn int, digest string) (ledger.Record, error) {
		var resumeSHA string
		if r.cfg.Workspace != "" {
			head, err := workspaceHead(r.cfg.Workspace)
			if err != nil {
				return ledger.Record{}, fmt.Errorf("suspend: reading the workspace HEAD: %w", err)
			}
			resumeSHA = head
		}
		return ledger.Suspend(turn, digest, resumeSHA), nil
	})
}

// latestTurn is the index and digest of the latest model call in events; -1 when there is none, which
// the ledger fold reads as a stamp without an anchor.
func latestTurn(events []session.Event) (int, string) {
	turn, last := -1, -1
	for i, ev := range events {
		if ev.Kind == session.KindModelCall {
			turn, last = turn+1, i
		}
	}
	if last < 0 {
		return -1, ""
	}
	return turn, evidence.TurnDigest(events[last].Request)
}
