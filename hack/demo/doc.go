// Command demo is `make demo`: the operator at work on the single-node cluster of hack/cluster, driven
// with kubectl the way a user would. It installs the operator with its Helm chart, charts/agentrewind
// (the manager under its own ServiceAccount), beside two add-ons, an S3 server and a fake model
// (hack/cluster/addons); applies
// hack/demo/manifests: an AgentSession that asks to be recorded (the operator runs the triage agent of
// examples/proxy-agent beside the rewind proxy, its search on the tracker's MCP server through the
// proxy, then verifies the run and judges whether it can resume; the demo prints the recorded
// timeline, MCP call included), a ForkRun that fixes the agent's flawed decision with a one-line prompt change, and a Replay
// ForkRun with zero live calls; and shows what kubectl and `agentrewind suite status` say. The recorded
// run finished every step it declared, so its ResumePlan is Complete; the demo ends with `agentrewind gc
// report --sessions`, what the garbage collector would delete and when.
//
// The cluster stays up afterwards: the demo prints the KUBECONFIG to explore it with, and `make
// cluster-down` stops it.
package main
