package controller

import (
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrewind/agentrewind/internal/controller/jobs"
)

// CacheOptions are the manager's cache options: base (the namespaces watched) with what keeps the
// cache, and the manager's memory and start-up, in the size of the operator's own objects rather than
// the cluster's:
//   - Jobs: only those the operator made (every engine, fork, recording, snapshot and sweep Job carries
//     app.kubernetes.io/managed-by=agentrewind, set by jobs.Build). A cluster's other Jobs (its CI, its
//     CronJobs) are neither listed, watched, nor held; a Job of another's under a name the operator
//     wants is found through the API server instead (ensureJob).
//   - managedFields are dropped from every cached object: no controller here reads them, and on a
//     small object they are often the larger half.
func CacheOptions(base cache.Options) cache.Options {
	opts := base
	opts.ByObject = map[client.Object]cache.ByObject{}
	for obj, by := range base.ByObject {
		opts.ByObject[obj] = by
	}
	opts.ByObject[&batchv1.Job{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{jobs.LabelManagedBy: jobs.ManagedBy})}
	opts.DefaultTransform = cache.TransformStripManagedFields()
	return opts
}
