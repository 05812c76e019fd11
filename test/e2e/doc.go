// Package e2e is the end-to-end suite: the operator deployed from config/default as a Deployment under its
// own ServiceAccount on a real cluster (the single-node cluster of hack/cluster, or the one in
// KUBECONFIG), driven through the API like a user. Its tests carry the e2e build tag: run `make e2e`.
//
// TestMain deploys the add-ons of hack/cluster/addons (versitygw as the store Service
// agentrewind-store, the fake model as fake-llm), serves a second fake model from this process behind
// the Service fake-llm-counted (the manager's --anthropic-upstream and --openai-upstream, so tests count
// the live calls that reach it; the suite must therefore run on the node), records one session of the
// proxy-agent example on this machine through `agentrewind proxy --mode record`, and rolls out the
// manager. Each scenario then pushes that session into its own namespace's prefix of the store and
// works from there; the OpenAI scenarios record their own, on each OpenAI API.
package e2e
