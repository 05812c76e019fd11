package main

import (
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func testZone(t *testing.T) *zone {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "agentrewind-store", Namespace: "agentrewind-system"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dual", Namespace: "a"}, Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.21", "fd00::21"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "headless", Namespace: "a"}, Spec: corev1.ServiceSpec{ClusterIP: "None", ClusterIPs: []string{"None"}}},
	} {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return &zone{domain: "cluster.local.", services: listersv1.NewServiceLister(idx)}
}

func TestAnswer(t *testing.T) {
	z := testZone(t)
	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
		want  []string // the records' data
	}{
		{"agentrewind-store.agentrewind-system.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.20"}},
		{"Agentrewind-Store.agentrewind-system.svc.Cluster.Local.", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.20"}},
		{"agentrewind-store.agentrewind-system.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, nil},
		{"dual.a.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.21"}},
		{"dual.a.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"fd00::21"}},
		{"headless.a.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil},
		// The search path's misses: the short name under a pod's namespace and under svc.
		{"agentrewind-store.agentrewind-system.svc.e2e.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"agentrewind-store.agentrewind-system.svc.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"missing.agentrewind-system.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"agentrewind-system.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil},
		{"cluster.local.", dns.TypeSOA, dns.RcodeSuccess, nil},
		// Nothing outside the cluster domain is answered or forwarded.
		{"api.anthropic.com.", dns.TypeA, dns.RcodeRefused, nil},
		{"evilcluster.local.", dns.TypeA, dns.RcodeRefused, nil},
	} {
		rrs, rcode := z.answer(dns.Question{Name: tc.name, Qtype: tc.qtype, Qclass: dns.ClassINET})
		var got []string
		for _, rr := range rrs {
			switch r := rr.(type) {
			case *dns.A:
				got = append(got, r.A.String())
			case *dns.AAAA:
				got = append(got, r.AAAA.String())
			}
			if rr.Header().Name != tc.name {
				t.Errorf("%s: record named %s, want the question's name", tc.name, rr.Header().Name)
			}
		}
		if rcode != tc.rcode || len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
			t.Errorf("%s %s: rcode %s records %v, want %s %v", tc.name, dns.TypeToString[tc.qtype], dns.RcodeToString[rcode], got, dns.RcodeToString[tc.rcode], tc.want)
		}
	}
}
