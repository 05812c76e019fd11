// Package controller holds the operator's reconcilers. They gather facts from the cluster and the
// store, run the engine in Jobs (package jobs), map the Jobs' results into status through
// internal/apimap and set kstatus conditions (package conditions). They never judge a session
// themselves and never copy a credential into an object, an event or a log.
package controller
