// Package task owns the contract between an engine Job and the controller that started it: one
// versioned Result per task (verify, resume-plan, replay, fork, checkpoint, gc-sweep), the strict
// decoder a controller reads results/<job-uid>.json with, and the summary of at most 4 KiB that goes to
// the pod's termination message. It holds types and their checks only: no I/O, no Kubernetes types.
package task
