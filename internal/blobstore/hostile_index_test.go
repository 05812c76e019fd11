package blobstore

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// indexLie rewrites a pushed session's segments.json as a hostile or careless store would, keeping
// its eventsHash: every lie must be refused by a pull and by a streaming read, naming what is wrong.
type indexLie struct {
	name string
	edit func(idx *segmentIndex, other segmentIndex)
	// says is a piece of the error that names the fault.
	says string
}

var indexLies = []indexLie{
	{"two segments swapped", func(idx *segmentIndex, _ segmentIndex) {
		idx.Segments[1], idx.Segments[2] = idx.Segments[2], idx.Segments[1]
	}, "sha256"},
	{"a segment listed twice", func(idx *segmentIndex, _ segmentIndex) {
		idx.Segments = append(idx.Segments[:2], idx.Segments[1:]...)
	}, "sha256"},
	{"a segment left out", func(idx *segmentIndex, _ segmentIndex) {
		idx.Segments = append(idx.Segments[:1], idx.Segments[2:]...)
	}, "sha256"},
	{"another session's segment added", func(idx *segmentIndex, other segmentIndex) {
		idx.Segments = append(idx.Segments, other.Segments[len(other.Segments)-1])
	}, "sha256"},
	{"another session's segment in place of one", func(idx *segmentIndex, other segmentIndex) {
		idx.Segments[1] = other.Segments[1]
	}, "sha256"},
	{"a segment one byte longer than it is", func(idx *segmentIndex, _ segmentIndex) {
		idx.Segments[1].Bytes++
	}, "segments[1].bytes"},
	{"a segment 2^53+1 bytes long", func(idx *segmentIndex, _ segmentIndex) {
		idx.Segments[2].Bytes = 1<<53 + 1
	}, "segments[2].bytes"},
	{"sizes that add up past 2^63", func(idx *segmentIndex, _ segmentIndex) {
		idx.Segments[1].Bytes, idx.Segments[2].Bytes = 1<<62, 1<<62
	}, "bytes"},
	{"a segment of no bytes", func(idx *segmentIndex, _ segmentIndex) {
		idx.Segments[0].Bytes = 0
	}, "segments[0]"},
}

func TestASegmentIndexThatLiesIsRefusedByPullAndByStreamingRead(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	mem := NewMemObjectStore()
	store := NewSessionStore(mem, Layout{}, StoreOptions{Parallelism: 2})
	for _, id := range []string{"victim", "other"} {
		dir := filepath.Join(root, id)
		writeSession(t, dir, id, "", payloads(uint64(len(id))*100, 40, 900))
		if _, err := store.Push(ctx, dir); err != nil {
			t.Fatal(err)
		}
	}
	index := func(id string) (segmentIndex, []byte) {
		data, ok := mem.Bytes(indexKey(store.Layout(), mem, id))
		if !ok {
			t.Fatalf("%s has no segments.json", id)
		}
		var idx segmentIndex
		if err := json.Unmarshal(data, &idx); err != nil {
			t.Fatal(err)
		}
		return idx, data
	}
	honest, honestBytes := index("victim")
	other, _ := index("other")
	if len(honest.Segments) < 4 || len(other.Segments) < 2 {
		t.Fatalf("victim has %d segments and other %d: too few for the lies", len(honest.Segments), len(other.Segments))
	}
	if _, err := store.Pull(ctx, "victim", filepath.Join(root, "honest")); err != nil {
		t.Fatalf("the honest index does not pull: %v", err)
	}
	for _, lie := range indexLies {
		t.Run(lie.name, func(t *testing.T) {
			idx, _ := index("victim")
			lie.edit(&idx, other)
			data, err := json.Marshal(idx)
			if err != nil {
				t.Fatal(err)
			}
			key := indexKey(store.Layout(), mem, "victim")
			mem.Set(key, data)
			defer mem.Set(key, honestBytes)
			_, err = store.Pull(ctx, "victim", filepath.Join(t.TempDir(), "pulled"))
			if err == nil || !strings.Contains(err.Error(), lie.says) {
				t.Fatalf("pull: got %v, want an error naming %q", err, lie.says)
			}
			// A streaming read may meet the lie sooner, as lines out of order (the structure check).
			if err := drainEvents(ctx, store, "victim"); err == nil || lie.says != "sha256" && !strings.Contains(err.Error(), lie.says) {
				t.Fatalf("streaming read: got %v, want an error naming %q", err, lie.says)
			}
		})
	}
}

// drainEvents reads session id's events to the end through OpenEvents.
func drainEvents(ctx context.Context, store *SessionStore, id string) error {
	stream, err := store.OpenEvents(ctx, id)
	if err != nil {
		return err
	}
	defer stream.Close()
	for {
		if _, err := stream.Next(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}
