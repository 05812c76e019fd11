// Package triage is the sample agent: an issue-triage bot written against replay.AgentContext, with a
// deterministic stand-in for the model so it runs anywhere without a key. It draws an id and the time,
// asks the model for a search, searches the tracker, asks the model for a label and applies it.
//
// Its recorded decision is wrong on purpose: it labels a crash "bug" when the team wanted code owners
// to review first. Forking the run at the decision with a one-line prompt fix is the demo of what
// agentrewind is for.
package triage
