package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// TestConcurrentRecordedCallsReuseTheirUpstreamConnections records an agent whose 8 lanes call at once,
// 25 calls each, and counts the connections the upstream accepted: every call after the first of a
// lane must find an idle keep-alive connection, so at most two per lane are opened (one, but for the
// moment a finished call's connection takes to go back to the pool). With http.DefaultTransport's two
// idle connections a host, most calls opened a connection of their own (over 100 here).
func TestConcurrentRecordedCallsReuseTheirUpstreamConnections(t *testing.T) {
	const lanes, calls = 8, 25
	var opened atomic.Int64
	upstream := httptest.NewUnstartedServer(fakellm.New(corpusScript))
	upstream.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			opened.Add(1)
		}
	}
	upstream.Start()
	t.Cleanup(upstream.Close)
	rec := startProxy(t, Options{Mode: Record, Dir: filepath.Join(t.TempDir(), "run"), ID: "run",
		Upstreams: map[string]string{"anthropic": upstream.URL}})
	bodies := corpusBodies(lanes * calls)
	agent := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: lanes}}
	failures := make(chan error, lanes*calls)
	var wg sync.WaitGroup
	for lane := range lanes {
		wg.Go(func() {
			for i := range calls {
				if err := postInLane(agent, rec.url, fmt.Sprintf("lane-%d", lane), bodies[lane*calls+i]); err != nil {
					failures <- err
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	if out := rec.stop(t); out.Err != nil || out.Record == nil || out.Record.HarnessErr != nil {
		t.Fatalf("record: %+v", out)
	}
	if got := opened.Load(); got > 2*lanes {
		t.Errorf("%d calls in %d concurrent lanes opened %d upstream connections, want at most %d", lanes*calls, lanes, got, 2*lanes)
	}
}

// postInLane posts a Messages request body in the named lane and reads the whole answer.
func postInLane(c *http.Client, base, lane string, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderLane, lane)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("lane %s: %d %s", lane, resp.StatusCode, out)
	}
	return nil
}
