// Package chart tests the Helm chart charts/agentrewind by rendering it with the pinned helm (make helm):
// that it installs what config/ does (the same CRDs and RBAC rules), a restricted manager, the values
// as the manager's flags, no secret value, and that its schema refuses a misspelt value.
package chart
