// Package docs holds the user documentation (README.md at the root, docs/*.md here) and no code: its
// test checks that every make target, relative link, anchor and agentrewind command they name exists.
package docs
