package blobstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The server itself bounds a delete window: deletes sent inside it remove their objects, and a
// delete sent after it closed by the server's clock is refused and removes nothing, however the
// sender's clock or pauses run. The store's time read from its answers is within a few seconds of
// this host's (both are this machine's clock here).
func TestS3DeleteWindowIsEnforcedByTheServer(t *testing.T) {
	env := startS3(t)
	_, objs := env.sessionStore(t, StoreOptions{})
	ctx := context.Background()
	put := func(key string) {
		t.Helper()
		if err := objs.Put(ctx, key, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	put("w/inside")
	put("w/after")
	now, err := objs.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(now); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("the store's time %s is %s from this host's", now, d)
	}
	w, err := objs.OpenDeleteWindow(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := objs.DeleteKeysIn(ctx, w, []string{"w/inside", "w/never-stored"}); err != nil {
		t.Fatalf("a delete inside its window: %v", err)
	}
	if _, err := objs.Stat(ctx, "w/inside"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the object deleted inside the window is still there: %v", err)
	}
	time.Sleep(w.Closes().Add(1500 * time.Millisecond).Sub(now))
	err = objs.DeleteKeysIn(ctx, w, []string{"w/after"})
	if !errors.Is(err, ErrWindowClosed) {
		t.Fatalf("a delete after its window closed: got %v, want ErrWindowClosed", err)
	}
	if _, err := objs.Stat(ctx, "w/after"); err != nil {
		t.Fatalf("the server deleted after the window closed: %v", err)
	}
}
