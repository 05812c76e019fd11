package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the proxy's Prometheus series.
type metrics struct {
	requests  *prometheus.CounterVec
	upstreams *prometheus.CounterVec
	drifts    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentrewind_proxy_requests_total",
			Help: "Requests the proxy answered, by endpoint, mode and outcome (ok, drift, upstream_error, client_error, error)."},
			[]string{"endpoint", "mode", "outcome"}),
		upstreams: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentrewind_proxy_upstream_calls_total",
			Help: "Calls the proxy sent upstream, by provider (or tool) and HTTP status (error when none came back)."},
			[]string{"provider", "status"}),
		drifts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentrewind_proxy_drifts_total",
			Help: "Requests the recording did not hold, by mode and kind."}, []string{"mode", "kind"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.upstreams, m.drifts} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) upstream(provider, status string) {
	m.upstreams.WithLabelValues(provider, status).Inc()
}
