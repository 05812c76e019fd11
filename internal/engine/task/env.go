package task

// The environment an engine Job receives its git credentials in, from Secret key references, so the
// values never appear in the Job's spec, its arguments or a log. The controller sets them; the
// resume-plan task reads them.
const (
	EnvGitUsername      = "AGENTREWIND_GIT_USERNAME"
	EnvGitPassword      = "AGENTREWIND_GIT_PASSWORD"
	EnvGitSSHPrivateKey = "AGENTREWIND_GIT_SSH_PRIVATE_KEY"
	EnvGitSSHKnownHosts = "AGENTREWIND_GIT_SSH_KNOWN_HOSTS"
)
