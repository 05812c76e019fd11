package blobsweep_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/blobstore"
	"github.com/agentrewind/agentrewind/internal/engine/gc/blobsweep"
)

func memHash(i int) string {
	s := sha256.Sum256([]byte(fmt.Sprint("mem", i)))
	return hex.EncodeToString(s[:])
}

func memPut(t *testing.T, m *blobstore.MemObjectStore, key, data string, at time.Time) {
	t.Helper()
	if err := m.Put(context.Background(), key, strings.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	m.SetModified(key, at)
}

// TestSweepOverGeneratedStores checks the sweep end to end on random stores in memory: sessions
// committed or not, checkpoint manifests, shared blobs and orphans of random ages. No blob a root
// references is deleted, none younger than the margin, and every other one is.
func TestSweepOverGeneratedStores(t *testing.T) {
	layout, _ := blobstore.NewLayout("p")
	rng := rand.New(rand.NewPCG(7, 13))
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	margin := 6 * time.Hour
	var deleted int
	for iter := range 200 {
		m := blobstore.NewMemObjectStore()
		pool := 1 + rng.IntN(80)
		needed := map[string]bool{}
		refs := func() string {
			var b strings.Builder
			for range rng.IntN(5) {
				h := memHash(rng.IntN(pool))
				needed[h] = true
				fmt.Fprintf(&b, `{"blobs":{"result":%q}}`+"\n", h)
			}
			return b.String()
		}
		for s := range rng.IntN(20) {
			id := fmt.Sprint("s", s)
			memPut(t, m, layout.SessionEvents(id), refs(), now.Add(-time.Hour))
			if rng.IntN(4) != 0 { // the others are uploads in progress
				memPut(t, m, layout.SessionMeta(id), "{}", now.Add(-time.Hour))
			}
		}
		for c := range rng.IntN(4) {
			memPut(t, m, layout.CheckpointManifest(memHash(1000+c)), `{"files":[`+strings.ReplaceAll(refs(), "\n", ",")+`{}]}`, now)
		}
		ages := map[string]time.Time{}
		for i := range pool + 10 {
			h := memHash(i)
			ages[h] = now.Add(-time.Duration(rng.IntN(12*60)) * time.Minute)
			memPut(t, m, layout.Blob(h), "x", ages[h])
		}
		rep, err := blobsweep.Run(context.Background(), m, blobsweep.Options{Layout: layout, Margin: margin, Lock: &blobsweep.MemLock{},
			Holder: "t", Clock: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		left := map[string]bool{}
		for _, k := range m.Keys(layout.BlobsPrefix()) {
			h, _ := layout.BlobHashFromKey(k)
			left[h] = true
		}
		for h, at := range ages {
			old := at.Before(now.Add(-margin))
			switch {
			case needed[h] && !left[h]:
				t.Fatalf("store %d: referenced blob %s deleted", iter, h)
			case !old && !left[h]:
				t.Fatalf("store %d: blob %s younger than the margin deleted", iter, h)
			case !needed[h] && old && left[h]:
				t.Fatalf("store %d: unreferenced old blob %s kept", iter, h)
			case !left[h]:
				deleted++
			}
		}
		if rep.Deleted+int64(len(left)) != int64(len(ages)) {
			t.Fatalf("store %d: reported %d deleted, %d of %d left", iter, rep.Deleted, len(left), len(ages))
		}
	}
	if deleted < 500 {
		t.Fatalf("only %d blobs deleted over all stores: the generator is too narrow", deleted)
	}
}

func TestSweepRefusesWhatItCannotDoSafely(t *testing.T) {
	layout, _ := blobstore.NewLayout("p")
	m := blobstore.NewMemObjectStore()
	if _, err := blobsweep.Run(context.Background(), m, blobsweep.Options{Layout: layout, Margin: time.Hour}); err == nil ||
		!strings.Contains(err.Error(), "lock") {
		t.Errorf("a deleting sweep without a lock: err = %v", err)
	}
	if _, err := blobsweep.Run(context.Background(), m, blobsweep.Options{Layout: layout, Margin: -time.Second, DryRun: true}); err == nil {
		t.Error("a negative margin was accepted")
	}
	if _, err := blobsweep.Run(context.Background(), m, blobsweep.Options{Layout: layout, DryRun: true}); err != nil {
		t.Errorf("a dry run needs no lock: %v", err)
	}
}

// A committed session whose log the listing does not show (damaged, or a key the listing skipped)
// references blobs nobody can name: a dry run reports it, and a sweep that deletes deletes nothing.
func TestSweepReportsACommittedSessionWithoutItsLogAndDeletesNothing(t *testing.T) {
	layout, _ := blobstore.NewLayout("p")
	m := blobstore.NewMemObjectStore()
	now := time.Now()
	memPut(t, m, layout.SessionMeta("broken"), "{}", now)
	memPut(t, m, layout.SessionEvents("fine"), `{"blobs":{"result":"`+memHash(1)+`"}}`, now)
	memPut(t, m, layout.SessionMeta("fine"), "{}", now)
	memPut(t, m, layout.Blob(memHash(1)), "x", now.Add(-48*time.Hour))
	memPut(t, m, layout.Blob(memHash(2)), "broken's, perhaps", now.Add(-48*time.Hour))
	rep, err := blobsweep.Run(context.Background(), m, blobsweep.Options{Layout: layout, Margin: time.Hour, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rep.Damaged) != "[broken]" || rep.Sessions != 2 || rep.Plan.Referenced != 1 || rep.Plan.Delete != 1 {
		t.Errorf("report: damaged %v, %d sessions, %d referenced, %d to delete", rep.Damaged, rep.Sessions, rep.Plan.Referenced, rep.Plan.Delete)
	}
	rep, err = blobsweep.Run(context.Background(), m, blobsweep.Options{Layout: layout, Margin: time.Hour, Lock: &blobsweep.MemLock{}, Holder: "t"})
	if err == nil || !strings.Contains(err.Error(), "nothing was deleted") || !strings.Contains(err.Error(), "broken") || rep.Deleted != 0 {
		t.Fatalf("a deleting sweep past a session without its log: %v, %d deleted", err, rep.Deleted)
	}
	if _, ok := m.Bytes(layout.Blob(memHash(2))); !ok {
		t.Fatal("the sweep deleted a blob while a committed session's log was missing")
	}
}
