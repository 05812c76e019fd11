package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentrewind/agentrewind/internal/fakellm"
	"gopkg.in/dnaeon/go-vcr.v4/pkg/cassette"
	"gopkg.in/dnaeon/go-vcr.v4/pkg/recorder"
)

// The proxy's benchmarks, each a ratio measured in one run (`make bench`): replay throughput against
// go-vcr, the latency a replayed call adds over the fake upstream answering directly, and the cost of
// recording over calling the upstream directly. Absolute times depend on the machine; compare the
// ratios. The properties they rest on (zero upstream calls, byte-identical bodies) are asserted in
// replay_property_test.go, not here.

// BenchmarkProxyReplayVsGoVCR replays the same n recorded Anthropic Messages calls three ways, to
// the same plain net/http client, which posts each request body (all built before the timing, on
// every side), reads the full response body and checks it equals the recorded one:
//   - proxy: the proxy in replay mode over loopback HTTP, serving from a session recorded through the
//     proxy from fakellm: per call, an HTTP round trip over a keep-alive connection, the request
//     parsed and normalized, fingerprinted (canonical JSON + SHA-256), looked up in the matcher's FIFO
//     buckets, the recorded answer's secrets restored and denormalized;
//   - go-vcr default: go-vcr v4's recorder in ModeReplayOnly as the client's http.RoundTripper (no
//     network at all), serving from a cassette recorded from the same fakellm, with its default
//     matcher, as a user gets it: the cassette scans its interactions in order for the first one not
//     yet replayed whose method, URL, headers, body, form and other request fields are equal, and
//     builds a debug record of each one it passes (to io.Discard by default), so call k costs a pass
//     over the k-1 before it;
//   - go-vcr body-hash: the same with a matcher a user would write for speed: method, URL and the
//     SHA-256 of the body, the request's hashed once per call and each interaction's once per run.
//
// Both sides serve byte-identical bodies (checked before timing). Loading the session or cassette
// and starting the proxy are outside the timing. go-vcr's scan is quadratic in n, so a go-vcr side
// is cut off after a minute (goVCRBudget): its rate over the calls it got through is then an upper
// bound on its rate over all n, and the speed-up is reported as proxy/go-vcr-<side>-at-least. A side
// predicted, from the last size it ran at, to need over ten minutes is not run (the log says so).
// Metrics: each side's calls/s and the speed-ups proxy/go-vcr-default and proxy/go-vcr-hash (issue
// 11's goal: ≥ 200 at 10k calls).
func BenchmarkProxyReplayVsGoVCR(b *testing.B) {
	sides := []string{"default", "hash"}
	vcrLast := map[string]vcrRun{} // per go-vcr side, its time at the last size it finished
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("calls=%d", n), func(b *testing.B) {
			_, fakeURL := startFake(b)
			bodies := corpusBodies(n)
			s, want := recordCorpus(b, fakeURL, bodies)
			matchers := map[string]recorder.MatcherFunc{"default": cassette.NewDefaultMatcher(), "hash": bodyHashMatcher()}
			var run []string
			for _, side := range sides {
				if last, ok := vcrLast[side]; ok && last.predict(n) > 10*goVCRBudget {
					b.Logf("go-vcr %s: not run at %d calls, predicted %s from %s at %d (its scan is quadratic)",
						side, n, last.predict(n).Round(time.Second), last.d.Round(time.Millisecond), last.n)
					continue
				}
				run = append(run, side)
			}
			var cassetteName string
			if len(run) > 0 {
				var vcrWant [][]byte
				cassetteName, vcrWant = recordCassette(b, fakeURL, bodies)
				for i := range want {
					if !bytes.Equal(want[i], vcrWant[i]) {
						b.Fatalf("call %d: the session and the cassette hold different answers:\n%s\n%s", i, want[i], vcrWant[i])
					}
				}
			}
			var proxyTime time.Duration
			vcrTime, vcrCalls, vcrCurve := map[string]time.Duration{}, map[string]int{}, map[string][]time.Duration{}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				rep := startProxy(b, Options{Mode: Replay, Session: s})
				c := &http.Client{Transport: &http.Transport{}}
				b.StartTimer()
				start := time.Now()
				for i, body := range bodies {
					if got := postBody(b, c, rep.url, body); !bytes.Equal(got, want[i]) {
						b.Fatalf("proxy call %d served %s, want %s", i, got, want[i])
					}
				}
				proxyTime += time.Since(start)
				b.StopTimer()
				if out := rep.stop(b); out.Err != nil {
					b.Fatalf("replay: %v", out.Err)
				}
				for _, side := range run {
					r, err := recorder.New(cassetteName, recorder.WithMode(recorder.ModeReplayOnly), recorder.WithSkipRequestLatency(true),
						recorder.WithMatcher(matchers[side]))
					if err != nil {
						b.Fatal(err)
					}
					c = &http.Client{Transport: r}
					b.StartTimer()
					start = time.Now()
					elapsed := make([]time.Duration, 0, n) // after each call
					for i, body := range bodies {
						if time.Since(start) > goVCRBudget {
							break
						}
						if got := postBody(b, c, fakeURL, body); !bytes.Equal(got, want[i]) {
							b.Fatalf("go-vcr call %d served %s, want %s", i, got, want[i])
						}
						elapsed = append(elapsed, time.Since(start))
					}
					vcrCalls[side] += len(elapsed)
					vcrCurve[side] = elapsed
					vcrTime[side] += time.Since(start)
					b.StopTimer()
					if err := r.Stop(); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
			calls := float64(n * b.N)
			proxyRate := calls / proxyTime.Seconds()
			b.ReportMetric(proxyRate, "proxy-calls/s")
			for _, side := range run {
				vcrRate := float64(vcrCalls[side]) / vcrTime[side].Seconds()
				b.ReportMetric(vcrRate, "go-vcr-"+side+"-calls/s")
				if vcrCalls[side] == n*b.N {
					b.ReportMetric(proxyRate/vcrRate, "proxy/go-vcr-"+side)
					vcrLast[side] = vcrRun{n: n, d: vcrTime[side] / time.Duration(b.N)}
					continue
				}
				// Cut off: its rate over the first calls bounds its rate over all of them from above
				// (call k costs a pass over the k-1 before it), so the speed-up is at least this; and
				// its time for all n, extrapolated from the a·k + b·k² its first calls took (least
				// squares over every call), gives the speed-up it would have had.
				predicted := extrapolate(vcrCurve[side], n)
				b.Logf("go-vcr %s: cut off after %d of %d calls in %s; all %d extrapolated to %s",
					side, vcrCalls[side], n*b.N, goVCRBudget, n, predicted.Round(time.Second))
				b.ReportMetric(proxyRate/vcrRate, "proxy/go-vcr-"+side+"-at-least")
				b.ReportMetric(predicted.Seconds()/(proxyTime.Seconds()/float64(b.N)), "proxy/go-vcr-"+side+"-extrapolated")
				vcrLast[side] = vcrRun{n: vcrCalls[side], d: vcrTime[side]}
			}
		})
	}
}

// goVCRBudget is how long a go-vcr side may take for one pass over the calls: a minute, or
// ARW_GOVCR_BUDGET (a Go duration, such as 40m) to let it run to the end and measure, not extrapolate.
var goVCRBudget = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("ARW_GOVCR_BUDGET")); err == nil && d > 0 {
		return d
	}
	return time.Minute
}()

// vcrRun is how long a go-vcr side took for n calls.
type vcrRun struct {
	n int
	d time.Duration
}

// predict is the time for m calls, go-vcr's scan being quadratic.
func (r vcrRun) predict(m int) time.Duration {
	f := float64(m) / float64(r.n)
	return time.Duration(float64(r.d) * f * f)
}

// extrapolate fits T(k) = a·k + b·k² (go-vcr's cost: a pass over every earlier interaction per call)
// by least squares to the elapsed time after each of the first calls, and returns T(n).
func extrapolate(elapsed []time.Duration, n int) time.Duration {
	if len(elapsed) < 2 {
		return 0
	}
	var s2, s3, s4, s1y, s2y float64 // Σk², Σk³, Σk⁴, Σk·T, Σk²·T
	for i, d := range elapsed {
		k, y := float64(i+1), d.Seconds()
		s2, s3, s4, s1y, s2y = s2+k*k, s3+k*k*k, s4+k*k*k*k, s1y+k*y, s2y+k*k*y
	}
	// a·s2 + b·s3 = s1y and a·s3 + b·s4 = s2y
	det := s2*s4 - s3*s3
	a, b := (s1y*s4-s2y*s3)/det, (s2*s2y-s3*s1y)/det
	x := float64(n)
	return time.Duration((a*x + b*x*x) * float64(time.Second))
}

// bodyHashMatcher matches on method, URL and the SHA-256 of the body: the request's body is read and
// hashed once per request, and each recorded body once per run.
func bodyHashMatcher() recorder.MatcherFunc {
	var last *http.Request
	var lastHash [sha256.Size]byte
	recorded := map[string][sha256.Size]byte{}
	return func(r *http.Request, i cassette.Request) bool {
		if r.Method != i.Method || r.URL.String() != i.URL {
			return false
		}
		if r != last {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return false
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			last, lastHash = r, sha256.Sum256(body)
		}
		h, ok := recorded[i.Body]
		if !ok {
			h = sha256.Sum256([]byte(i.Body))
			recorded[i.Body] = h
		}
		return h == lastHash
	}
}

// recordCassette records bodies with go-vcr v4 from the fake, as a user of go-vcr would (its recorder
// as the client's transport), and returns the cassette's name and the answers.
func recordCassette(b *testing.B, fakeURL string, bodies [][]byte) (string, [][]byte) {
	b.Helper()
	name := filepath.Join(b.TempDir(), "cassette")
	r, err := recorder.New(name, recorder.WithMode(recorder.ModeRecordOnly))
	if err != nil {
		b.Fatal(err)
	}
	c := &http.Client{Transport: r}
	answers := make([][]byte, len(bodies))
	for i, body := range bodies {
		answers[i] = postBody(b, c, fakeURL, body)
	}
	if err := r.Stop(); err != nil {
		b.Fatal(err)
	}
	return name, answers
}

// BenchmarkProxyReplayAddedLatency measures what a replayed call adds to a call's latency: each of
// 2,000 requests is sent, one at a time and to each side in turn (the order rotating from call to call,
// so that noise from the machine falls on every side), (a) directly to fakellm over loopback, (b) to the
// proxy in replay mode over loopback and (c) through a bare httputil.ReverseProxy hop to fakellm (what
// one proxy hop costs by itself, for scale: a replay never calls the upstream), each from its own plain
// client with a warm keep-alive connection, reading the full body and checking it equals the recorded
// one. The metrics are the differences of the percentiles, side minus direct: added-p50-µs and
// added-p99-µs for the replay (goal: p99 under 1 ms), bare-hop-added-p50-µs and bare-hop-added-p99-µs,
// and proxy/direct at p50.
func BenchmarkProxyReplayAddedLatency(b *testing.B) {
	const n = 2000
	_, fakeURL := startFake(b)
	bare := startBareHop(b, fakeURL)
	bodies := corpusBodies(n)
	s, want := recordCorpus(b, fakeURL, bodies)
	var lat [3][]time.Duration // direct, replayed, bare hop
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		rep := startProxy(b, Options{Mode: Replay, Session: s})
		urls := [3]string{fakeURL, rep.url, bare}
		var clients [3]*http.Client
		for i := range clients {
			clients[i] = &http.Client{Transport: &http.Transport{}}
		}
		// Open every connection before timing: a replay cannot take an extra model call, /healthz can.
		postBody(b, clients[0], fakeURL, bodies[0])
		postBody(b, clients[2], bare, bodies[0])
		if resp, err := clients[1].Get(rep.url + "/healthz"); err != nil {
			b.Fatal(err)
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		b.StartTimer()
		for i, body := range bodies {
			for k := range 3 {
				side := (i + k) % 3
				start := time.Now()
				if got := postBody(b, clients[side], urls[side], body); !bytes.Equal(got, want[i]) {
					b.Fatalf("call %d to side %d answered %s, want %s", i, side, got, want[i])
				}
				lat[side] = append(lat[side], time.Since(start))
			}
		}
		b.StopTimer()
		if out := rep.stop(b); out.Err != nil {
			b.Fatalf("replay: %v", out.Err)
		}
		b.StartTimer()
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	added := func(side int, p float64) float64 { return us(percentile(lat[side], p) - percentile(lat[0], p)) }
	b.ReportMetric(added(1, 0.50), "added-p50-µs")
	b.ReportMetric(added(1, 0.99), "added-p99-µs")
	b.ReportMetric(added(2, 0.50), "bare-hop-added-p50-µs")
	b.ReportMetric(added(2, 0.99), "bare-hop-added-p99-µs")
	b.ReportMetric(float64(percentile(lat[1], 0.50))/float64(percentile(lat[0], 0.50)), "proxy/direct-p50")
}

// percentile is the nearest-rank p-th percentile of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return sorted[max(0, int(math.Ceil(p*float64(len(sorted))))-1)]
}

// BenchmarkProxyRecordOverhead measures what recording costs over calling the upstream directly, and how
// much of it is the extra loopback hop that any proxy costs. 1,000 distinct requests are sent one at a
// time, each to three sides in turn (the order rotating from call to call, so that noise from the machine
// falls on every side), each side from its own plain client with a keep-alive connection, reading the
// full body and checking it equals the upstream's answer:
//   - direct: to fakellm over loopback;
//   - bare hop: through an httputil.ReverseProxy that does nothing but forward to the same fakellm over
//     a keep-alive connection — the floor for any HTTP proxy beside the agent;
//   - proxy: through the rewind proxy in record mode to the same fakellm.
//
// It runs three times: over the short requests of corpusBodies, answered at once (~0.2 ms, a hundred
// times faster than any hosted model, so that the proxy's own cost shows); over requests that each carry
// a distinct 20 KiB message (a file an agent read, say), which the session stores as a blob; and over
// the short requests with the fake taking 20 ms to answer (modelLatency), still 25 to 1,000 times
// faster than a hosted model's answer, so that the overhead is also read against a call's time as an
// agent meets it.
//
// Metrics (the calls only, their total times): overhead-% (proxy over direct, minus 1; issue 11's goal ≤
// 10 %, which a bare loopback hop alone passes tenfold at 0.2 ms), bare-hop-% (the bare hop over direct), over-bare-hop-% (proxy over the bare hop), added-µs and
// bare-hop-added-µs (the mean time per call each adds over direct), and overhead-with-commit-% (the
// proxy's time including closing and committing the session at the end of the run).
func BenchmarkProxyRecordOverhead(b *testing.B) {
	const n = 1000
	b.Run("short", func(b *testing.B) { benchmarkRecordOverhead(b, corpusBodies(n), 0) })
	b.Run("20KiB-message", func(b *testing.B) { benchmarkRecordOverhead(b, largeBodies(n, 20<<10), 0) })
	b.Run("model-latency=20ms", func(b *testing.B) { benchmarkRecordOverhead(b, corpusBodies(200), modelLatency) })
}

// modelLatency is how long the fake takes to answer in the last of BenchmarkProxyRecordOverhead's runs.
const modelLatency = 20 * time.Millisecond

// largeBodies are n distinct Messages requests whose user turn is about size bytes of text.
func largeBodies(n, size int) [][]byte {
	bodies := make([][]byte, n)
	for i := range bodies {
		text := fmt.Sprintf("Task %05d: review this file.\n", i)
		for line := 0; len(text) < size; line++ {
			text += fmt.Sprintf("%05d.%04d: func f() { return strings.Repeat(\"x\", 42) }\n", i, line)
		}
		msg, _ := json.Marshal(text)
		bodies[i] = fmt.Appendf(nil, `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":%s}]}`, msg)
	}
	return bodies
}

func benchmarkRecordOverhead(b *testing.B, bodies [][]byte, latency time.Duration) {
	n := len(bodies)
	script := corpusScript
	if latency > 0 {
		script.Faults = []fakellm.Fault{{Kind: fakellm.FaultSlow, Delay: fakellm.Duration{Duration: latency}}}
	}
	srv := httptest.NewServer(fakellm.New(script))
	b.Cleanup(srv.Close)
	fakeURL := srv.URL
	bare := startBareHop(b, fakeURL)
	var times [3]time.Duration // direct, bare hop, proxy
	var commitTime time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		rec := startProxy(b, Options{Mode: Record, Dir: filepath.Join(b.TempDir(), "run"), ID: "run",
			Upstreams: map[string]string{"anthropic": fakeURL}})
		urls := [3]string{fakeURL, bare, rec.url}
		var clients [3]*http.Client
		for i := range clients {
			clients[i] = &http.Client{Transport: &http.Transport{}}
		}
		b.StartTimer()
		for i, body := range bodies {
			var answers [3][]byte
			for k := range 3 {
				side := (i + k) % 3
				start := time.Now()
				answers[side] = postBody(b, clients[side], urls[side], body)
				times[side] += time.Since(start)
			}
			if !bytes.Equal(answers[1], answers[0]) || !bytes.Equal(answers[2], answers[0]) {
				b.Fatalf("call %d: the upstream answered %s, the bare hop %s, the proxy %s", i, answers[0], answers[1], answers[2])
			}
		}
		start := time.Now()
		out := rec.stop(b)
		commitTime += time.Since(start)
		if out.Err != nil || out.Record == nil || out.Record.HarnessErr != nil {
			b.Fatalf("record: %+v", out)
		}
	}
	direct, hop, proxy := times[0].Seconds(), times[1].Seconds(), times[2].Seconds()
	calls := float64(n * b.N)
	b.ReportMetric(100*(proxy/direct-1), "overhead-%")
	b.ReportMetric(100*(hop/direct-1), "bare-hop-%")
	b.ReportMetric(100*(proxy/hop-1), "over-bare-hop-%")
	b.ReportMetric(1e6*(proxy-direct)/calls, "added-µs")
	b.ReportMetric(1e6*(hop-direct)/calls, "bare-hop-added-µs")
	b.ReportMetric(100*((proxy+commitTime.Seconds())/direct-1), "overhead-with-commit-%")
}

// startBareHop serves, on loopback, an httputil.ReverseProxy that forwards every request to upstream and
// does nothing else, keeping its connections alive (the transport the rewind proxy's default client
// uses): what one proxy hop costs by itself. It returns the hop's base URL. Only JSON answers are compared:
// with another proxy calling the same fakellm, this hop of Go 1.26 cut about one streamed answer in a
// few hundred ("use of closed network connection" reading the upstream; a second bare hop in place of
// the rewind proxy did the same).
func startBareHop(tb testing.TB, upstream string) string {
	tb.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		tb.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: upstreamTransport(),
	}
	srv := httptest.NewServer(rp)
	tb.Cleanup(srv.Close)
	return srv.URL
}

// TestExtrapolateRecoversALinearPlusQuadraticCost checks the go-vcr extrapolation on a cost of known
// shape: 1 ms a call plus 1 µs per earlier call.
func TestExtrapolateRecoversALinearPlusQuadraticCost(t *testing.T) {
	cost := func(k int) time.Duration {
		return time.Duration(k)*time.Millisecond + time.Duration(k*k)*time.Microsecond
	}
	elapsed := make([]time.Duration, 2000)
	for i := range elapsed {
		elapsed[i] = cost(i + 1)
	}
	if got, want := extrapolate(elapsed, 10000), cost(10000); math.Abs(got.Seconds()-want.Seconds()) > 0.001*want.Seconds() {
		t.Fatalf("extrapolated %s, want %s", got, want)
	}
}
