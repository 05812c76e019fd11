package replay

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/evidence/gittest"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// headAgent claims a start commit of its own in its INTENT, makes one model call and suspends.
func headAgent(ctx context.Context, ac AgentContext) error {
	if err := ac.Ledger(ctx, ledger.Intent("run", "triage", strings.Repeat("0", 40))); err != nil {
		return err
	}
	if _, err := ac.Model(ctx, session.Request{Model: "m", Messages: []session.Message{userMessage("go")}}); err != nil {
		return err
	}
	return ac.Suspend(ctx)
}

// TestAGivenWorkspaceHeadIsTheMintedStart covers a recorder without a work tree (the proxy beside an
// agent's container): the commit the Job names is the START, outranking the agent's INTENT, a replay
// mints it again, and a work tree, when there is one, is read instead.
func TestAGivenWorkspaceHeadIsTheMintedStart(t *testing.T) {
	given := strings.Repeat("ab", 20)
	model := &fakeModel{answer: func(session.Request) string { return "ok" }}
	dir := filepath.Join(t.TempDir(), "run")
	if _, err := Record(context.Background(), RecordOptions{Dir: dir, ID: "run", Model: model,
		Config: Config{WorkspaceHead: given}}, headAgent); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, dir)
	state := ledger.Fold(s.Events)
	if !state.StartMinted || state.StartSHA != given {
		t.Fatalf("start %q minted=%v, want the given %s", state.StartSHA, state.StartMinted, given)
	}
	var first ledger.Record
	for _, ev := range s.Events {
		if ev.Kind == session.KindLedger {
			if err := json.Unmarshal(ev.Ledger, &first); err != nil || first.Op != ledger.OpStart || ev.Author != session.AuthorRecorder {
				t.Fatalf("the first ledger record is %s by %s (%v), want the recorder's START", ev.Ledger, ev.Author, err)
			}
			break
		}
	}
	// The recorder never saw the workspace move, so the SUSPEND names no resume SHA.
	if !state.Checkpoint.Present || state.SuspendSHA != "" {
		t.Fatalf("checkpoint %+v, suspend SHA %q, want a checkpoint and no SHA", state.Checkpoint, state.SuspendSHA)
	}

	// The replay mints the recorded START again, without being told the commit, and lines up.
	if _, err := Replay(context.Background(), ReplayOptions{Session: s}, headAgent); err != nil {
		t.Fatalf("replay: %v", err)
	}

	repo := gittest.New(t)
	head := repo.Commit("initial", map[string]string{"README.md": "x"})
	dir = filepath.Join(t.TempDir(), "tree")
	if _, err := Record(context.Background(), RecordOptions{Dir: dir, ID: "tree", Model: model,
		Config: Config{Workspace: repo.Dir, WorkspaceHead: given}}, headAgent); err != nil {
		t.Fatal(err)
	}
	if got := ledger.Fold(mustOpen(t, dir).Events).StartSHA; got != head {
		t.Fatalf("with a work tree the START is %q, want its HEAD %s", got, head)
	}
}
