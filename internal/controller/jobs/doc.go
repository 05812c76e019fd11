// Package jobs builds the engine Jobs the controllers run (deterministic names, owner reference,
// restricted pod security, credentials by Secret reference) and reads back what a finished Job
// reported: its result in the store, else its pod's termination message. It makes no verdict.
package jobs
