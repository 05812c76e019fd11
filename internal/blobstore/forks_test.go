package blobstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/replay/agenttest"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// forkFamily writes a run of 300 turns and 20 forks of it, one at each of its last 20 steps, each
// answering differently from there on, and returns their directories, parent first. The forks are
// written as replay.Fork writes them (session.WriterOptions.Parent; replay's
// TestAForkStoresTheStepsItServedAsItsParentsLines checks that a real fork's log is the same), from
// events built without replaying 300 turns 20 times.
func forkFamily(root string) ([]string, error) {
	agent := agenttest.Agent{Turns: 300, AnswerBytes: 200, ResultBytes: 400}
	write := func(dir string, meta session.Meta, events []session.Event, parent []session.Event) error {
		w, err := session.Create(dir, meta, session.WriterOptions{Parent: parent})
		if err != nil {
			return err
		}
		for _, ev := range events {
			if ev.Kind == session.KindSessionStart {
				m := meta
				m.SchemaVersion = session.CurrentSchemaVersion
				ev.Meta = &m
			}
			if err := w.Append(ev); err != nil {
				return err
			}
		}
		_, err = w.Close(nil)
		return err
	}
	events, err := agent.Events()
	if err != nil {
		return nil, err
	}
	parentDir := filepath.Join(root, "parent")
	if err := write(parentDir, session.Meta{ID: "parent", CreatedAt: 1, FingerprintMode: "strict"}, events, nil); err != nil {
		return nil, err
	}
	parent, err := session.Open(parentDir)
	if err != nil {
		return nil, err
	}
	dirs := []string{parentDir}
	last := parent.Events[len(parent.Events)-1].Step // session_end
	for k := range int64(20) {
		live := agent
		live.Variant = fmt.Sprintf("fork %d ", k)
		at := last - 1 - k
		events, err := agent.ForkEvents(at, live)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(root, fmt.Sprintf("fork-%d", k))
		meta := session.Meta{ID: fmt.Sprintf("fork-%d", k), Parent: "parent", ForkedAtStep: &at, CreatedAt: 2, FingerprintMode: "strict"}
		if err := write(dir, meta, events, parent.Events); err != nil {
			return nil, err
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
}

// forkSharing pushes the 20 forks into one store, where they share their parent's prefix, then each
// under a prefix of its own (20 full copies: nothing shared), and returns the bytes of the copies over
// the bytes of the shared store. Both sides push the same 20 directories; the parent itself is pushed
// to neither (its prefix is in every fork), as BenchmarkStoreForkDedup counts.
func forkSharing(t testing.TB, objs ObjectStore) float64 {
	dirs, err := forkFamily(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	shared := NewSessionStore(objs, mustLayout(t, "shared"), StoreOptions{})
	for i, dir := range dirs[1:] {
		res, err := shared.Push(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && res.SegmentsSkipped*10 < res.Segments*9 {
			t.Errorf("%s shares %d of its %d segments with the forks before it", res.ID, res.SegmentsSkipped, res.Segments)
		}
	}
	forks := storedBytes(t, objs, "shared/")
	for i, dir := range dirs[1:] {
		if _, err := NewSessionStore(objs, mustLayout(t, fmt.Sprintf("copy-%d", i)), StoreOptions{}).Push(ctx, dir); err != nil {
			t.Fatal(err)
		}
	}
	copies := storedBytes(t, objs, "copy-")
	// A fork pulled from the shared store is the fork, byte for byte.
	out := filepath.Join(t.TempDir(), "fork-7")
	if _, err := shared.Pull(ctx, "fork-7", out); err != nil {
		t.Fatal(err)
	}
	assertSameSession(t, dirs[8], out)
	ratio := float64(copies) / float64(forks)
	t.Logf("20 forks: %d bytes as full copies, %d bytes sharing their prefix: %.2fx", copies, forks, ratio)
	return ratio
}

func mustLayout(t testing.TB, prefix string) Layout {
	t.Helper()
	l, err := NewLayout(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestS3TwentyForksStoreNineTimesLessThanTwentyCopies runs against a real S3 server (versitygw).
func TestS3TwentyForksStoreNineTimesLessThanTwentyCopies(t *testing.T) {
	env := startS3(t)
	_, objs := env.sessionStore(t, StoreOptions{})
	if ratio := forkSharing(t, objs); ratio < 9 {
		t.Fatalf("20 forks store %.2fx fewer bytes than 20 full copies, want at least 9", ratio)
	}
}

// BenchmarkStoreForksSharingTheirPrefix reports forkSharing's figure on the S3 server: 20 forks of a
// 300-turn run, each at one of its last 20 steps, pushed into one store (where they share their
// parent's segments) and as 20 independent full copies; both sides push the same directories.
func BenchmarkStoreForksSharingTheirPrefix(b *testing.B) {
	env := startS3(b)
	var ratio float64
	for b.Loop() {
		_, objs := env.sessionStore(b, StoreOptions{})
		ratio = forkSharing(b, objs)
	}
	b.ReportMetric(ratio, "copies/forks-bytes")
}
