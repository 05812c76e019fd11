// Command agentrewind is the one binary of the project: the operator (`manager`), the engine its Jobs
// run, the rewind proxy and the command-line tools over recorded sessions.
package main
