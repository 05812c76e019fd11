package controller

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// storageCollector reports each budgeted namespace's stored bytes and limits, read from the
// StorageBudgets' status in the informer cache on every scrape (exact after a restart, gone with the
// budget). Unlike the operator's other metrics it is labelled by namespace: one series per kind of
// each namespace that has a budget, which is what a team reads it for. Several budgets in one
// namespace report the same usage; the smallest limit is the namespace's budget.
type storageCollector struct {
	reader       client.Reader
	used, budget *prometheus.Desc
}

// RegisterStorageCollector registers the collector of agentrewind_storage_bytes and
// agentrewind_storage_budget_bytes over reader (the manager's cache) with reg, in place of one a
// previous manager in this process registered.
func RegisterStorageCollector(reg prometheus.Registerer, reader client.Reader) error {
	c := newStorageCollector(reader)
	err := reg.Register(c)
	if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
		reg.Unregister(are.ExistingCollector)
		err = reg.Register(c)
	}
	return err
}

func newStorageCollector(reader client.Reader) *storageCollector {
	return &storageCollector{
		reader: reader,
		used: prometheus.NewDesc("agentrewind_storage_bytes",
			"Bytes a namespace with a StorageBudget keeps in the store, by kind: sessions (their recording bytes) and checkpoints (the bytes their snapshots added).",
			[]string{"namespace", "kind"}, nil),
		budget: prometheus.NewDesc("agentrewind_storage_budget_bytes",
			"The StorageBudget limit of a namespace's stored bytes, by kind (sessions, checkpoints); absent for a kind without a limit.",
			[]string{"namespace", "kind"}, nil),
	}
}

func (c *storageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.used; ch <- c.budget }

func (c *storageCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var list v1alpha1.StorageBudgetList
	if err := c.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.used, err)
		return
	}
	type key struct{ namespace, kind string }
	used, limit := map[key]int64{}, map[key]int64{}
	for i := range list.Items {
		b := &list.Items[i]
		for kind, u := range map[string]v1alpha1.StorageUsage{"sessions": b.Status.Sessions, "checkpoints": b.Status.Checkpoints} {
			k := key{b.Namespace, kind}
			if u.UsedBytes != nil {
				used[k] = *u.UsedBytes
			}
			if l, ok := limit[k]; u.LimitBytes != nil && (!ok || *u.LimitBytes < l) {
				limit[k] = *u.LimitBytes
			}
		}
	}
	for k, v := range used {
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(v), k.namespace, k.kind)
	}
	for k, v := range limit {
		ch <- prometheus.MustNewConstMetric(c.budget, prometheus.GaugeValue, float64(v), k.namespace, k.kind)
	}
}
