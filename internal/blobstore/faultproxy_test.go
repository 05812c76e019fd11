package blobstore

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// fault is one way the proxy misbehaves for a request.
type fault int

const (
	faultNone        fault = iota
	fault500               // answer 500 InternalError without forwarding
	fault503               // answer 503 SlowDown without forwarding
	faultResetBefore       // read half the request body, then reset the connection: a truncated upload
	faultResetAfter        // forward, then reset instead of answering: the request took effect unseen
	faultTruncate          // forward, send the headers and half the body, then close: a truncated read
	faultLatency           // forward after a delay
	faultStall             // hold the request past the client's timeout
	faultFalseOK           // answer 200 with an empty body without forwarding: an upload lost unseen
	faultFlip              // forward, then alter the body of a GET's answer: damage on the way down
	faultTrickle           // forward, then send a GET's body trickleBytes per trickle interval
	faultAlterUpload       // alter the body of a PUT before forwarding it: damage on the way up
	faultSkewed            // answer 403 RequestTimeTooSkewed dated skew ahead, as a store whose clock is off
	numFaults
)

var faultNames = [...]string{"none", "500", "503-slowdown", "reset-before", "reset-after", "truncate", "latency", "stall", "false-ok",
	"flip", "trickle", "alter-upload", "skewed"}

func (f fault) String() string { return faultNames[f] }

// faultProxy is a loopback HTTP proxy in front of an S3 server that injects faults on a
// deterministic schedule: whether and how a request is faulted depends only on the seed, the
// request (method, path, query, range) and how many times that request was seen, never on timing
// or goroutine interleaving. A request is faulted at most maxPerRequest times, which bounds the
// schedule: with more attempts than that, every request eventually gets through.
type faultProxy struct {
	upstream      string
	seed          uint64
	weights       [numFaults]int // relative weights; faultNone's weight is the chance of no fault
	maxPerRequest int
	stall         time.Duration
	trickle       time.Duration // between two writes of a trickled body
	trickleBytes  int           // bytes per write of a trickled body (default 1)
	skew          time.Duration // how far ahead of this host the Date of a faultSkewed answer is
	// only, when set, limits the faults to the requests it accepts.
	only func(r *http.Request) bool
	// flip alters a body for faultFlip and faultAlterUpload (default: one bit of its middle byte).
	flip func(body []byte)

	addr      string
	transport *http.Transport

	mu       sync.Mutex
	seen     map[string]int
	injected [numFaults]int
}

func startFaultProxy(t testing.TB, upstream string, seed uint64, weights map[fault]int, maxPerRequest int) *faultProxy {
	t.Helper()
	p := &faultProxy{upstream: upstream, seed: seed, maxPerRequest: maxPerRequest, stall: 2 * time.Second, trickle: 20 * time.Millisecond,
		flip: func(b []byte) { b[len(b)/2] ^= 0x01 },
		seen: map[string]int{}, transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}}
	for f, w := range weights {
		p.weights[f] = w
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = l.Addr().String()
	srv := &http.Server{Handler: p, ErrorLog: nil}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); p.transport.CloseIdleConnections() })
	return p
}

// decide picks the fault for this sighting of the request.
func (p *faultProxy) decide(r *http.Request) fault {
	if p.only != nil && !p.only(r) {
		return faultNone
	}
	id := r.Method + " " + r.URL.RequestURI() + " " + r.Header.Get("Range")
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.seen[id]
	p.seen[id]++
	if n >= p.maxPerRequest {
		return faultNone
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s#%d", id, n)
	rng := rand.New(rand.NewPCG(p.seed, h.Sum64()))
	total := 0
	for _, w := range p.weights {
		total += w
	}
	pick := rng.IntN(max(total, 1))
	for f, w := range p.weights {
		if pick < w {
			p.injected[f]++
			return fault(f)
		}
		pick -= w
	}
	return faultNone
}

// counts returns how many times each fault was injected.
func (p *faultProxy) counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for f := fault(1); f < numFaults; f++ {
		if p.injected[f] > 0 {
			out[f.String()] = p.injected[f]
		}
	}
	return out
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch f := p.decide(r); f {
	case fault500:
		writeS3Error(w, http.StatusInternalServerError, "InternalError", "injected internal error")
		return
	case fault503:
		writeS3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
		return
	case faultResetBefore:
		_, _ = io.CopyN(io.Discard, r.Body, max(r.ContentLength/2, 0))
		drop(w, true)
		return
	case faultStall:
		select {
		case <-time.After(p.stall):
		case <-r.Context().Done():
		}
		writeS3Error(w, http.StatusServiceUnavailable, "SlowDown", "stalled")
		return
	case faultSkewed:
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Date", time.Now().Add(p.skew).UTC().Format(http.TimeFormat))
		writeS3Error(w, http.StatusForbidden, "RequestTimeTooSkewed", "The difference between the request time and the current time is too large.")
		return
	case faultFalseOK:
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return
	case faultLatency:
		time.Sleep(time.Duration(1+len(r.URL.Path)%20) * time.Millisecond)
		p.forward(w, r, faultNone)
	case faultAlterUpload:
		if r.Method == http.MethodPut && r.ContentLength > 0 {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				drop(w, true)
				return
			}
			p.flip(body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		p.forward(w, r, faultNone)
	default:
		p.forward(w, r, f)
	}
}

func (p *faultProxy) forward(w http.ResponseWriter, r *http.Request, f fault) {
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host, out.RequestURI = "http", p.upstream, ""
	out.Host = r.Host // the signature covers the Host the client addressed
	if r.ContentLength == 0 {
		out.Body = nil
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		writeS3Error(w, http.StatusBadGateway, "InternalError", "proxy: "+err.Error())
		return
	}
	defer resp.Body.Close()
	if f == faultResetAfter {
		_, _ = io.Copy(io.Discard, resp.Body)
		drop(w, true)
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	ok := resp.StatusCode/100 == 2 && r.Method == http.MethodGet && resp.ContentLength > 0
	if f == faultFlip && ok {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			drop(w, true)
			return
		}
		p.flip(body)
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
		return
	}
	w.WriteHeader(resp.StatusCode)
	if f == faultTrickle && ok {
		chunk := make([]byte, max(p.trickleBytes, 1))
		for {
			n, err := io.ReadFull(resp.Body, chunk)
			if n > 0 { // the body's last chunk may be short
				if _, err := w.Write(chunk[:n]); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
			if err != nil {
				return
			}
			select {
			case <-time.After(p.trickle):
			case <-r.Context().Done():
				return
			}
		}
	}
	if f == faultTruncate && resp.ContentLength > 1 && r.Method == http.MethodGet {
		_, _ = io.CopyN(w, resp.Body, resp.ContentLength/2)
		w.(http.Flusher).Flush() // the status is sent already; push the half body out before closing
		drop(w, false)
		return
	}
	_, _ = io.Copy(w, resp.Body)
}

// drop closes the client connection: with a TCP reset when hard, else with an orderly close that
// leaves a body already begun short of its Content-Length. (Flushing an unbegun response would send
// a 200 status, so it is left to Hijack, which flushes only what was written.)
func drop(w http.ResponseWriter, hard bool) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	_ = buf.Flush()
	if tcp, ok := conn.(*net.TCPConn); ok && hard {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

func writeS3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>fault</RequestId></Error>`, code, msg)
}
