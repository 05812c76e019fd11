package controller

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/agentrewind/agentrewind/api/v1alpha1"
	"github.com/agentrewind/agentrewind/internal/controller/jobs"
	"github.com/agentrewind/agentrewind/internal/proxyargs"
)

// The pod of every Job that runs an agent (a ForkRun's replay or fork, an AgentSession's recording):
// the agent container and the rewind proxy beside it as a native sidecar (an init container with
// restartPolicy Always). The kubelet starts the proxy first and the agent only once the proxy's
// startup probe passed; when the agent exits, the kubelet stops the proxy with SIGTERM, and the proxy
// commits the run (and, replaying or forking, writes its result: results/<job-uid>.json and its
// termination message).
const (
	// ProxyContainer and AgentContainer name the two containers.
	ProxyContainer = jobs.SidecarContainerName
	AgentContainer = "agent"
	// ProxyPort is where the proxy serves the model APIs and its probes.
	ProxyPort = 8787
	// ProxyHealthPort serves only the proxy's probes and metrics on the pod network; the model API
	// listens on loopback, where only the agent beside it can reach it (it spends the provider key).
	ProxyHealthPort = 8788

	learnDir = "/var/run/agentrewind/learn"
	// placeholderKey is the API key the agent's SDK sends: the proxy replaces it with the provider key
	// when it goes upstream, and a replay never goes upstream at all.
	placeholderKey = "agentrewind-placeholder"
)

// The agent's environment the operator sets, over anything of the same name in spec.agent.env.
const (
	EnvAnthropicBaseURL = "ANTHROPIC_BASE_URL"
	EnvOpenAIBaseURL    = "OPENAI_BASE_URL"
	EnvProxy            = "AGENTREWIND_PROXY"
	EnvAnthropicAPIKey  = "ANTHROPIC_API_KEY"
	EnvOpenAIAPIKey     = "OPENAI_API_KEY"
	// EnvMCPPrefix starts the variable that gives the agent an MCP server of spec.agent.mcpServers on
	// the proxy: AGENTREWIND_MCP_<NAME> (MCPServerEnv).
	EnvMCPPrefix = "AGENTREWIND_MCP_"
)

// proxyListenArgs are the proxy's addresses: the model API on loopback, beside the agent only; the
// probes on the pod network.
func proxyListenArgs() []string {
	return []string{proxyargs.Flag(proxyargs.FlagListen), fmt.Sprintf("127.0.0.1:%d", ProxyPort),
		proxyargs.Flag(proxyargs.FlagHealthListen), fmt.Sprintf(":%d", ProxyHealthPort)}
}

// liveToolArgs are the proxy's --tool flags for the agent's tool backends, for a recording's proxy:
// forks and replays answer tool calls from the recording, so their proxies get none and can call no
// tool by construction.
// The API server admits only names and URLs the proxy takes; the URL is checked again here so that a
// backend carrying credentials never reaches a pod spec, whatever admitted it.
func liveToolArgs(tools []v1alpha1.ToolBackend) ([]string, error) {
	var args []string
	for i, t := range tools {
		if !proxyargs.ToolName.MatchString(t.Name) {
			return nil, &specError{fmt.Sprintf("spec.agent.tools[%d].name %q: use 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit", i, t.Name)}
		}
		if err := proxyargs.CheckToolURL(t.URL); err != nil {
			return nil, &specError{fmt.Sprintf("spec.agent.tools[%d].url: %v", i, err)}
		}
		args = append(args, proxyargs.Tool(t.Name, t.URL)...)
	}
	return args, nil
}

// mcpServerName is the API's pattern for spec.agent.mcpServers[].name: lower-case, '-' and no '_',
// so that no two names share a variable (MCPServerEnv), and every one is a name the proxy mounts.
var mcpServerName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// MCPServerEnv is the variable that tells the agent where the proxy serves the MCP server name.
func MCPServerEnv(name string) string {
	return EnvMCPPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// mcpServerArgs are the proxy's --mcp-server flags for the agent's MCP servers. A recording's proxy
// relays to each server (name=URL); a fork's or a replay's mounts each by name alone, so that it
// answers the agent from the recording and has no URL it could call, a fork's tail included (its new
// calls follow spec.fork.tools.onMiss, as the tools' do). Like liveToolArgs, names and URLs are
// checked again so that a server URL carrying credentials never reaches a pod spec.
func mcpServerArgs(servers []v1alpha1.MCPServer, record bool) ([]string, error) {
	var args []string
	for i, m := range servers {
		if !mcpServerName.MatchString(m.Name) {
			return nil, &specError{fmt.Sprintf("spec.agent.mcpServers[%d].name %q: use 1 to 63 of a-z 0-9 -, starting and ending with a letter or digit", i, m.Name)}
		}
		if err := proxyargs.CheckToolURL(m.URL); err != nil {
			return nil, &specError{fmt.Sprintf("spec.agent.mcpServers[%d].url: %v", i, err)}
		}
		url := m.URL
		if !record {
			url = ""
		}
		args = append(args, proxyargs.MCPServer(m.Name, url)...)
	}
	return args, nil
}

// providerKeyEnv gives the proxy the providers' API keys as Secret key references; the agent never
// sees them.
func providerKeyEnv(k v1alpha1.ProviderKeys) []corev1.EnvVar {
	var env []corev1.EnvVar
	if k.Anthropic.Name != "" {
		env = append(env, jobs.SecretEnv(EnvAnthropicAPIKey, k.Anthropic.Name, k.Anthropic.Key, false))
	}
	if k.OpenAI.Name != "" {
		env = append(env, jobs.SecretEnv(EnvOpenAIAPIKey, k.OpenAI.Name, k.OpenAI.Key, false))
	}
	return env
}

// agentPod is a Job's pod while it is made into an agent beside the proxy: the pod, and its two
// containers until place puts them into it.
type agentPod struct {
	pod   *corev1.PodSpec
	proxy corev1.Container
	agent corev1.Container
}

// newAgentPod takes a Job built by jobs.Build for the proxy and makes its engine container the proxy
// sidecar, probed on /readyz, and adds the agent container: agent's image, command and arguments,
// its SDKs pointed at the proxy with a placeholder key, the same restricted security as the proxy, a
// writable /tmp of its own. Every Secret key the agent reads, the proxy learns as a secret to redact
// from the recording (--learn-secrets-from, the keys mounted for the proxy only).
// The agent may read no Secret key the proxy is given (a provider key, the store's credentials) nor
// any of keys, the provider keys of the session it runs: the agent is the untrusted party the proxy
// holds them for, so such a spec is refused rather than run.
func newAgentPod(job *batchv1.Job, agent v1alpha1.AgentSpec, keys ...v1alpha1.ProviderKeys) (*agentPod, error) {
	p := &agentPod{pod: &job.Spec.Template.Spec}
	proxy := p.pod.Containers[0]
	proxy.Name = ProxyContainer
	proxy.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	proxy.Ports = []corev1.ContainerPort{{Name: "health", ContainerPort: ProxyHealthPort, Protocol: corev1.ProtocolTCP}}
	ready := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(ProxyHealthPort)}}
	// The startup probe holds the agent back until the proxy pulled the session and serves; pulling a
	// large session may take a while, hence up to five minutes.
	proxy.StartupProbe = &corev1.Probe{ProbeHandler: ready, PeriodSeconds: 1, FailureThreshold: 300, TimeoutSeconds: 2}
	proxy.ReadinessProbe = &corev1.Probe{ProbeHandler: ready, PeriodSeconds: 5, TimeoutSeconds: 2}
	// A proxy that fails before it wrote its summary (a session it cannot open, a flag it refuses)
	// leaves the end of its log instead, which a run that crash-loops or failed quotes.
	proxy.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError

	env := agentEnv(agent.Env, agent.MCPServers...)
	if err := agentReadsProxySecret(env, proxy.Env, keys); err != nil {
		return nil, err
	}
	for i, sv := range learnedSecrets(env) {
		name := fmt.Sprintf("learn-%d", i)
		dir := fmt.Sprintf("%s/%d", learnDir, i)
		p.pod.Volumes = append(p.pod.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: sv.name, Items: sv.items, Optional: new(sv.optional)}}})
		proxy.VolumeMounts = append(proxy.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true})
		proxy.Args = append(proxy.Args, proxyargs.Flag(proxyargs.FlagLearnSecretsFrom), dir)
	}

	agentTmp := corev1.Volume{Name: "agent-tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	p.pod.Volumes = append(p.pod.Volumes, agentTmp)
	p.agent = corev1.Container{
		Name:                     AgentContainer,
		Image:                    agent.Image,
		Command:                  agent.Command,
		Args:                     agent.Args,
		Env:                      env,
		VolumeMounts:             []corev1.VolumeMount{{Name: agentTmp.Name, MountPath: jobs.TmpDir}},
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          proxy.SecurityContext.DeepCopy(),
	}
	p.proxy = proxy
	return p, nil
}

// agentReadsProxySecret refuses a variable of the agent's env (after agentEnv, which replaces the SDKs'
// key variables with placeholders) that reads a Secret key the proxy holds (a key of its env) or one
// of the provider keys.
func agentReadsProxySecret(agent, proxy []corev1.EnvVar, keys []v1alpha1.ProviderKeys) error {
	held := map[[2]string]bool{}
	for _, v := range proxy {
		if v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil {
			held[[2]string{v.ValueFrom.SecretKeyRef.Name, v.ValueFrom.SecretKeyRef.Key}] = true
		}
	}
	for _, k := range keys {
		for _, ref := range []v1alpha1.SecretKeyReference{k.Anthropic, k.OpenAI} {
			if ref.Name != "" {
				held[[2]string{ref.Name, ref.Key}] = true
			}
		}
	}
	for _, v := range agent {
		if v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := v.ValueFrom.SecretKeyRef
		if held[[2]string{ref.Name, ref.Key}] {
			return &specError{fmt.Sprintf("spec.agent.env (%s) reads key %s of Secret %s, a provider key or store credential only the rewind proxy may hold: "+
				"the agent gets a placeholder key and calls the model through the proxy; remove the variable", v.Name, ref.Key, ref.Name)}
		}
	}
	return nil
}

// mountWorkspace mounts the agent's workspace at /workspace: its claim, else, with scratch, an empty
// directory (a checkpoint is restored into it). It returns the mount, nil when there is none.
func (p *agentPod) mountWorkspace(w v1alpha1.WorkspaceVolume, scratch bool) *corev1.VolumeMount {
	switch {
	case w.ClaimName != "":
		p.pod.Volumes = append(p.pod.Volumes, corev1.Volume{Name: workspaceVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: w.ClaimName}}})
	case scratch:
		p.pod.Volumes = append(p.pod.Volumes, corev1.Volume{Name: workspaceVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	default:
		return nil
	}
	m := corev1.VolumeMount{Name: workspaceVolume, MountPath: workspaceMount, SubPath: w.SubPath}
	p.agent.VolumeMounts = append(p.agent.VolumeMounts, m)
	return &m
}

// place puts the containers into the pod: first the init containers that must finish before the
// proxy starts, then the proxy sidecar; the agent is the pod's one container.
func (p *agentPod) place(before ...corev1.Container) {
	p.pod.InitContainers = append(before, p.proxy)
	p.pod.Containers = []corev1.Container{p.agent}
}

// agentEnv is the agent's environment: spec.agent.env, then the SDKs' base URLs pointing at the proxy,
// placeholder API keys and each MCP server's address on the proxy, which replace any of the same name
// (a provider key in spec.agent.env never reaches the agent: the proxy holds the keys).
func agentEnv(user []corev1.EnvVar, mcpServers ...v1alpha1.MCPServer) []corev1.EnvVar {
	base := fmt.Sprintf("http://127.0.0.1:%d", ProxyPort)
	ours := []corev1.EnvVar{
		{Name: EnvAnthropicBaseURL, Value: base},
		{Name: EnvOpenAIBaseURL, Value: base + "/v1"},
		{Name: EnvProxy, Value: base},
		{Name: EnvAnthropicAPIKey, Value: placeholderKey},
		{Name: EnvOpenAIAPIKey, Value: placeholderKey},
		{Name: jobs.EnvTmpDir, Value: jobs.TmpDir},
		{Name: "HOME", Value: jobs.TmpDir},
	}
	for _, m := range mcpServers {
		ours = append(ours, corev1.EnvVar{Name: MCPServerEnv(m.Name), Value: base + "/mcp/" + m.Name})
	}
	set := map[string]bool{}
	for _, v := range ours {
		set[v.Name] = true
	}
	var out []corev1.EnvVar
	for _, v := range user {
		if !set[v.Name] {
			out = append(out, *v.DeepCopy())
		}
	}
	return append(out, ours...)
}

// learnedSecret is one Secret the agent reads keys of, as a volume of those keys for the proxy.
type learnedSecret struct {
	name     string
	items    []corev1.KeyToPath
	optional bool // every reference to it is optional, so a missing Secret must not hold the pod back
}

// learnedSecrets groups the agent's Secret key references by Secret, in a stable order.
func learnedSecrets(env []corev1.EnvVar) []learnedSecret {
	bySecret := map[string]*learnedSecret{}
	var names []string
	for _, v := range env {
		if v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := v.ValueFrom.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		ls, ok := bySecret[ref.Name]
		if !ok {
			ls = &learnedSecret{name: ref.Name, optional: true}
			bySecret[ref.Name] = ls
			names = append(names, ref.Name)
		}
		ls.optional = ls.optional && optional
		if !containsKey(ls.items, ref.Key) {
			ls.items = append(ls.items, corev1.KeyToPath{Key: ref.Key})
		}
	}
	sort.Strings(names)
	out := make([]learnedSecret, 0, len(names))
	for _, n := range names {
		ls := bySecret[n]
		sort.Slice(ls.items, func(i, j int) bool { return ls.items[i].Key < ls.items[j].Key })
		for i := range ls.items {
			// Numbered files: a key such as ".token" would be a dot file, which the proxy skips.
			ls.items[i].Path = fmt.Sprintf("key-%d", i)
		}
		out = append(out, *ls)
	}
	return out
}

func containsKey(items []corev1.KeyToPath, key string) bool {
	for _, it := range items {
		if it.Key == key {
			return true
		}
	}
	return false
}
