package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
)

// TestGCReportSessionsCountsEachSessionOnce: a namespace named twice (-n a,a or -n a -n a), or
// among all of them (-n a,""), reports each of its sessions once, with counts to match, as a GC pass
// with such --gc-namespaces decides each once: they were listed, decided and counted once per mention.
func TestGCReportSessionsCountsEachSessionOnce(t *testing.T) {
	c, kubeconfig := apiServerWithKubeconfig(t, "gc-reporter-twice")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-twice-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	createGCPopulation(t, c, ns.Name, []gcTestSession{
		{name: "done", verdict: v1alpha1.VerdictComplete, evaluated: 10 * 24 * time.Hour},
		{name: "resumable", verdict: v1alpha1.VerdictResumable, evaluated: time.Hour},
	})
	for _, n := range [][]string{{"-n", ns.Name + "," + ns.Name}, {"-n", ns.Name, "-n", ns.Name}, {"-n", ns.Name + ","}} {
		args := append([]string{"gc", "report", "--sessions", "--kubeconfig", kubeconfig, "--grace", "24h", "-o", "json"}, n...)
		out, err := runCLI(t, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", n, err, out)
		}
		var rep gcSessionsReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: %v\n%s", n, err, out)
		}
		mine := map[string]int{}
		for _, d := range rep.Decisions {
			if name, ok := strings.CutPrefix(d.Session, ns.Name+"/"); ok {
				mine[name]++
			}
		}
		if mine["done"] != 1 || mine["resumable"] != 1 {
			t.Errorf("%v: decisions of %s %v, want each session once", n, ns.Name, mine)
		}
		if len(n) == 2 && n[1] != ns.Name+"," && (rep.Reachable != 1 || rep.Collectible != 1 || rep.Deleted != 1) {
			t.Errorf("%v: reachable %d, collectible %d, deleted %d, want 1 each", n, rep.Reachable, rep.Collectible, rep.Deleted)
		}
	}
}
