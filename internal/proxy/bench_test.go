package proxy

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"gopkg.in/dnaeon/go-vcr.v4/pkg/recorder"
)

// The proxy's benchmarks, each a ratio measured in one run (`make bench`): replay throughput against
// go-vcr, the latency a replayed call adds over the fake upstream answering directly, and the cost of
// recording over calling the upstream directly. Absolute times depend on the machine; compare the
// ratios. The properties they rest on (zero upstream calls, byte-identical bodies) are asserted in
// replay_property_test.go, not here.

// BenchmarkProxyReplayVsGoVCR replays the same n recorded Anthropic Messages calls two ways, to the
// same plain net/http client, which posts each request body, reads the full response body and checks
// it equals the recorded one:
//   - proxy: the proxy in replay mode over loopback HTTP, serving from a session recorded through the
//     proxy from fakellm (the engine fingerprints each request and serves the recorded answer);
//   - go-vcr: go-vcr v4's recorder in ModeReplayOnly as the client's http.RoundTripper, serving from a
//     cassette recorded from the same fakellm, with its default matcher, as a user gets it: the cassette
//     scans its interactions in order for the first one not yet replayed whose method, URL, headers,
//     body, form and other request fields are equal, and logs each one it passes (text-formatted at
//     debug level, to io.Discard by default), so call k costs a pass over the k-1 before it. In
//     v4.0.8 that logging, not the comparison, is most of go-vcr's time. Recorded latency is not
//     re-enacted (WithSkipRequestLatency), as the proxy does not re-enact it.
//
// Both sides serve byte-identical bodies (checked before timing). Loading the session or cassette
// and starting the proxy are outside the timing. Metrics: each side's calls/s and proxy/go-vcr, the
// speed-up (the goal is ≥ 200 at 10k calls).
func BenchmarkProxyReplayVsGoVCR(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("calls=%d", n), func(b *testing.B) {
			_, fakeURL := startFake(b)
			bodies := corpusBodies(n)
			s, want := recordCorpus(b, fakeURL, bodies)
			cassette, vcrWant := recordCassette(b, fakeURL, bodies)
			for i := range want {
				if !bytes.Equal(want[i], vcrWant[i]) {
					b.Fatalf("call %d: the session and the cassette hold different answers:\n%s\n%s", i, want[i], vcrWant[i])
				}
			}
			var proxyTime, vcrTime time.Duration
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

				r, err := recorder.New(cassette, recorder.WithMode(recorder.ModeReplayOnly), recorder.WithSkipRequestLatency(true))
				if err != nil {
					b.Fatal(err)
				}
				c = &http.Client{Transport: r}
				b.StartTimer()
				start = time.Now()
				for i, body := range bodies {
					if got := postBody(b, c, fakeURL, body); !bytes.Equal(got, want[i]) {
						b.Fatalf("go-vcr call %d served %s, want %s", i, got, want[i])
					}
				}
				vcrTime += time.Since(start)
				b.StopTimer()
				if err := r.Stop(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			calls := float64(n * b.N)
			b.ReportMetric(calls/proxyTime.Seconds(), "proxy-calls/s")
			b.ReportMetric(calls/vcrTime.Seconds(), "go-vcr-calls/s")
			b.ReportMetric(vcrTime.Seconds()/proxyTime.Seconds(), "proxy/go-vcr")
		})
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
// 2,000 requests is sent, one at a time and alternating so that noise from the machine falls on both,
// (a) directly to fakellm over loopback and (b) to the proxy in replay mode over loopback, each from
// its own plain client with a warm keep-alive connection, reading the full body and checking it
// equals the recorded one. The metrics are the differences of the percentiles, proxy minus direct:
// added-p50-µs and added-p99-µs (goal: p99 under 1 ms), and proxy/direct at p50.
func BenchmarkProxyReplayAddedLatency(b *testing.B) {
	const n = 2000
	_, fakeURL := startFake(b)
	bodies := corpusBodies(n)
	s, want := recordCorpus(b, fakeURL, bodies)
	var direct, replayed []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		rep := startProxy(b, Options{Mode: Replay, Session: s})
		dc, pc := &http.Client{Transport: &http.Transport{}}, &http.Client{Transport: &http.Transport{}}
		// Open both connections before timing: a replay cannot take an extra model call, /healthz can.
		postBody(b, dc, fakeURL, bodies[0])
		if resp, err := pc.Get(rep.url + "/healthz"); err != nil {
			b.Fatal(err)
		} else {
			resp.Body.Close()
		}
		b.StartTimer()
		for i, body := range bodies {
			start := time.Now()
			if got := postBody(b, dc, fakeURL, body); !bytes.Equal(got, want[i]) {
				b.Fatalf("direct call %d answered %s, want %s", i, got, want[i])
			}
			mid := time.Now()
			if got := postBody(b, pc, rep.url, body); !bytes.Equal(got, want[i]) {
				b.Fatalf("replayed call %d served %s, want %s", i, got, want[i])
			}
			direct, replayed = append(direct, mid.Sub(start)), append(replayed, time.Since(mid))
		}
		b.StopTimer()
		if out := rep.stop(b); out.Err != nil {
			b.Fatalf("replay: %v", out.Err)
		}
		b.StartTimer()
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(percentile(replayed, 0.50)-percentile(direct, 0.50)), "added-p50-µs")
	b.ReportMetric(us(percentile(replayed, 0.99)-percentile(direct, 0.99)), "added-p99-µs")
	b.ReportMetric(float64(percentile(replayed, 0.50))/float64(percentile(direct, 0.50)), "proxy/direct-p50")
}

// percentile is the nearest-rank p-th percentile of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return sorted[max(0, int(math.Ceil(p*float64(len(sorted))))-1)]
}

// BenchmarkProxyRecordOverhead measures what recording costs over calling the upstream directly:
// 1,000 distinct requests are sent, alternating one at a time, (a) directly to fakellm and (b) through
// the proxy in record mode to the same fakellm, each from its own plain client, reading the full body
// and checking it equals the upstream's answer. The metrics are overhead-% (proxy time over direct
// time, minus 1, the calls only; goal ≤ 10 %) and overhead-with-commit-% (the proxy's time including
// closing and committing the session at the end of the run).
func BenchmarkProxyRecordOverhead(b *testing.B) {
	const n = 1000
	_, fakeURL := startFake(b)
	bodies := corpusBodies(n)
	var directTime, proxyTime, commitTime time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		rec := startProxy(b, Options{Mode: Record, Dir: filepath.Join(b.TempDir(), "run"), ID: "run",
			Upstreams: map[string]string{"anthropic": fakeURL}})
		dc, pc := &http.Client{Transport: &http.Transport{}}, &http.Client{Transport: &http.Transport{}}
		b.StartTimer()
		for _, body := range bodies {
			start := time.Now()
			want := postBody(b, dc, fakeURL, body)
			mid := time.Now()
			if got := postBody(b, pc, rec.url, body); !bytes.Equal(got, want) {
				b.Fatalf("the proxy answered %s, the upstream %s", got, want)
			}
			directTime, proxyTime = directTime+mid.Sub(start), proxyTime+time.Since(mid)
		}
		start := time.Now()
		out := rec.stop(b)
		commitTime += time.Since(start)
		if out.Err != nil || out.Record == nil || out.Record.HarnessErr != nil {
			b.Fatalf("record: %+v", out)
		}
	}
	b.ReportMetric(100*(proxyTime.Seconds()/directTime.Seconds()-1), "overhead-%")
	b.ReportMetric(100*((proxyTime+commitTime).Seconds()/directTime.Seconds()-1), "overhead-with-commit-%")
}
