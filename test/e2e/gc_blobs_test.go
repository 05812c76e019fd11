//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/blobstore"
)

// A finished run collected past its grace leaves its blobs to the blob sweep: once its AgentSession
// and its objects under sessions/ are gone, nothing in the store references any of its blobs, and the
// sweep (asked with no margin, `gc report --store`) would delete every one of them. The run is alone
// under its namespace's prefix, so no other session shares them.
func TestACollectedRunLeavesEveryBlobToTheSweep(t *testing.T) {
	t.Parallel()
	ns := sessionNamespace(t, "gc-blobs")
	pushSession(t, recordedSession(), ns)
	s := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "finished", Namespace: ns},
		Spec: v1alpha1.AgentSessionSpec{SessionID: recordedID,
			Retention: v1alpha1.RetentionSpec{Policy: v1alpha1.RetentionDelete, GracePeriodSeconds: ptr.To[int64](1)}}}
	if err := k8s.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	store, err := blobstore.Open(t.Context(), storeConfig(""))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := store.List(t.Context(), ns+"/blobs/")
	if err != nil || len(blobs) == 0 {
		t.Fatalf("the pushed run's blobs under %s/blobs/: %d (%v)", ns, len(blobs), err)
	}
	eventually(t, 3*time.Minute, "the finished run collected", func(ctx context.Context) (bool, string, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(s), s)
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("still there: reachability %+v", s.Status.Reachability), err
		}
		left, err := store.List(ctx, ns+"/sessions/")
		return len(left) == 0, fmt.Sprintf("%d objects left under sessions/", len(left)), err
	})

	time.Sleep(1100 * time.Millisecond) // a margin of 0 keeps what was stored in the sweep's second
	cmd := exec.CommandContext(t.Context(), agentrewindBin, "gc", "report", "--store", "s3://"+storeBucket+"/"+ns,
		"--endpoint", storeEndpoint, "--margin", "0s")
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+storeAccessKey, "AWS_SECRET_ACCESS_KEY="+storeSecretKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agentrewind gc report --store: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(\d+) blob\(s\) would be deleted .*; (\d+) referenced\.`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("gc report says nothing of what it would delete:\n%s", out)
	}
	deleted, _ := strconv.Atoi(string(m[1]))
	referenced, _ := strconv.Atoi(string(m[2]))
	if deleted != len(blobs) || referenced != 0 {
		t.Errorf("gc report would delete %d blob(s) and keeps %d referenced, want all %d of the collected run's and none kept:\n%s",
			deleted, referenced, len(blobs), out)
	}
	t.Logf("agentrewind gc report --store:\n%s", strings.TrimSpace(string(out)))
}
