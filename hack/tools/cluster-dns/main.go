// Command cluster-dns is the single-node e2e cluster's DNS (hack/cluster): it answers A and AAAA
// queries for the ClusterIP Services the API server holds, as <service>.<namespace>.svc.<domain>, and
// nothing else. The kubelet's clusterDNS points pods at it, so in-cluster addresses such as
// http://agentrewind-store.agentrewind-system.svc:7070 resolve the way they do on a real cluster (the
// resolver's search path turns the short forms into the full name). Every other name is refused: there
// is no forwarding, so nothing a pod asks for leaves the machine.
//
// Usage: cluster-dns --kubeconfig FILE --listen 10.88.0.1:53 [--domain cluster.local]. It serves UDP
// and TCP once its Service cache has synced, and stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// ttl is short: Services come and go with every test namespace.
const ttl = 5

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of an identity that may list and watch Services")
	listen := flag.String("listen", "", "address to serve DNS on, UDP and TCP (the node's bridge address, port 53)")
	domain := flag.String("domain", "cluster.local", "the cluster domain (the kubelet's clusterDomain)")
	flag.Parse()
	if err := run(*kubeconfig, *listen, *domain); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-dns:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, listen, domain string) error {
	if kubeconfig == "" || listen == "" {
		return errors.New("--kubeconfig and --listen are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	factory := informers.NewSharedInformerFactory(cs, 0)
	services := factory.Core().V1().Services()
	services.Informer() // registers the informer before Start
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return fmt.Errorf("the %v cache did not sync within a minute: is the API server up, and may this identity list Services?", typ)
		}
	}

	z := &zone{domain: dns.Fqdn(strings.ToLower(domain)), services: services.Lister()}
	servers := []*dns.Server{
		{Addr: listen, Net: "udp", Handler: z},
		{Addr: listen, Net: "tcp", Handler: z},
	}
	failed := make(chan error, len(servers))
	for _, s := range servers {
		go func() { failed <- s.ListenAndServe() }()
	}
	fmt.Fprintf(os.Stderr, "cluster-dns: serving Services as <service>.<namespace>.svc.%s on %s (udp, tcp)\n", strings.TrimSuffix(z.domain, "."), listen)
	select {
	case err = <-failed:
		err = fmt.Errorf("serving on %s: %w", listen, err)
	case <-ctx.Done():
	}
	for _, s := range servers {
		_ = s.Shutdown()
	}
	return err
}

// zone answers for the cluster domain from the Service cache.
type zone struct {
	domain   string // fully qualified, lower case: "cluster.local."
	services listersv1.ServiceLister
}

func (z *zone) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	answers, rcode := z.answer(q)
	m.Rcode = rcode
	m.Answer = answers
	if rcode != dns.RcodeRefused {
		m.Authoritative = true
		if len(answers) == 0 {
			m.Ns = []dns.RR{z.soa()} // lets resolvers cache the negative answer for ttl seconds
		}
	}
	_ = w.WriteMsg(m)
}

// answer decides the answer to one question: the records and the response code. A name outside the
// cluster domain is refused (nothing is forwarded); a Service's name has its ClusterIPs of the asked
// family (none for other types, or for a headless Service: NOERROR without records); any other name
// under the domain does not exist.
func (z *zone) answer(q dns.Question) ([]dns.RR, int) {
	if q.Qclass != dns.ClassINET {
		return nil, dns.RcodeRefused
	}
	name := strings.ToLower(q.Name)
	if name == z.domain {
		return nil, dns.RcodeSuccess
	}
	rel, ok := strings.CutSuffix(name, "."+z.domain)
	if !ok {
		return nil, dns.RcodeRefused
	}
	labels := strings.Split(rel, ".")
	switch {
	case len(labels) == 1 && labels[0] == "svc", len(labels) == 2 && labels[1] == "svc":
		return nil, dns.RcodeSuccess // the names between the domain and a Service exist, without records
	case len(labels) != 3 || labels[2] != "svc":
		return nil, dns.RcodeNameError
	}
	svc, err := z.services.Services(labels[1]).Get(labels[0])
	if apierrors.IsNotFound(err) {
		return nil, dns.RcodeNameError
	}
	if err != nil {
		return nil, dns.RcodeServerFailure
	}
	var out []dns.RR
	for _, s := range clusterIPs(svc) {
		ip := net.ParseIP(s)
		switch {
		case ip == nil:
		case q.Qtype == dns.TypeA && ip.To4() != nil:
			out = append(out, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: ip.To4()})
		case q.Qtype == dns.TypeAAAA && ip.To4() == nil:
			out = append(out, &dns.AAAA{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: ip})
		}
	}
	return out, dns.RcodeSuccess
}

// clusterIPs are a Service's cluster addresses; a headless Service ("None") has none.
func clusterIPs(svc *corev1.Service) []string {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	if len(ips) == 1 && ips[0] == corev1.ClusterIPNone {
		return nil
	}
	return ips
}

func (z *zone) soa() dns.RR {
	return &dns.SOA{Hdr: dns.RR_Header{Name: z.domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns: "ns.dns." + z.domain, Mbox: "hostmaster." + z.domain, Serial: 1, Refresh: 60, Retry: 10, Expire: 3600, Minttl: ttl}
}
