package ui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// gatedSource opens sessions of a DirSource only once the test releases it, or fails with the
// request's context when that ends first, as a store pull does. It counts the loads it started.
type gatedSource struct {
	*DirSource
	entered chan struct{}
	release chan struct{}
	opens   atomic.Int64
}

func (g *gatedSource) Open(ctx context.Context, id string) (*session.Session, error) {
	g.opens.Add(1)
	g.entered <- struct{}{}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-g.release:
	}
	return g.DirSource.Open(ctx, id)
}

// TestServerLoadOutlivesTheClientThatAskedFirst: the first client to ask for a session closing its
// tab does not fail the others waiting for the same load, nor make the server load it again.
func TestServerLoadOutlivesTheClientThatAskedFirst(t *testing.T) {
	dir, err := NewDirSource(triageRoot(t), "")
	if err != nil {
		t.Fatal(err)
	}
	src := &gatedSource{DirSource: dir, entered: make(chan struct{}, 4), release: make(chan struct{})}
	srv := NewServer(src, Options{})

	first, leave := context.WithCancel(context.Background())
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/sessions/triage", nil).WithContext(first))
	}()
	<-src.entered
	second := httptest.NewRecorder()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		srv.ServeHTTP(second, httptest.NewRequest(http.MethodGet, "/api/sessions/triage", nil))
	}()
	time.Sleep(50 * time.Millisecond) // let the second request wait on the first one's load
	leave()
	go func() {
		for range src.entered { // a second load, if the server starts one, may proceed
		}
	}()
	time.Sleep(50 * time.Millisecond)
	close(src.release)
	wg.Wait()
	<-firstDone
	close(src.entered)
	if second.Code != http.StatusOK {
		t.Errorf("the second client got %d %s after the first left, want 200", second.Code, second.Body)
	}
	if n := src.opens.Load(); n != 1 {
		t.Errorf("the session was loaded %d times, want once", n)
	}
}

// TestServerLeavesNoGoroutineBehindClientsThatLeft: twenty clients that give up while their session
// loads leave no goroutine behind once the load ends and the server closes.
func TestServerLeavesNoGoroutineBehindClientsThatLeft(t *testing.T) {
	dir, err := NewDirSource(triageRoot(t), "")
	if err != nil {
		t.Fatal(err)
	}
	src := &gatedSource{DirSource: dir, entered: make(chan struct{}, 4), release: make(chan struct{})}
	baseline := runtime.NumGoroutine()
	ts := httptest.NewServer(NewServer(src, Options{}))
	ctx, leave := context.WithCancel(context.Background())
	var clients sync.WaitGroup
	for range 20 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/sessions/triage/events", nil)
			if res, err := ts.Client().Do(req); err == nil {
				res.Body.Close()
			}
		}()
	}
	<-src.entered
	time.Sleep(50 * time.Millisecond) // the other requests reach the server and wait on the load
	leave()
	clients.Wait()
	close(src.release)
	ts.Close() // waits for the handlers
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > baseline && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseline {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after the clients left and the server closed, %d before:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
	}
	if n := src.opens.Load(); n != 1 {
		t.Errorf("the session was loaded %d times, want once", n)
	}
}
