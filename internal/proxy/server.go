package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
)

// Mode is what the proxy does with the run it serves.
type Mode string

const (
	// Record forwards every call live and records it into a new session.
	Record Mode = "record"
	// Replay serves every call from a recorded session; nothing goes upstream.
	Replay Mode = "replay"
	// Fork serves a session's steps before AtStep and forwards the rest, with overrides, recording a
	// child session.
	Fork Mode = "fork"
)

// MaxBodyBytes is the largest request body the proxy accepts; a larger one is refused with 413 in
// the provider's error shape.
const MaxBodyBytes = 10 << 20

// Options configure a proxy run.
type Options struct {
	Mode Mode
	// Provider names the model API the run records (one per session): "anthropic" unless set. Replay
	// and fork take the recording's.
	Provider string
	// Dir is the session directory a recording or a fork's child is written to.
	Dir string
	// ID names a recording or a fork's child (default: the engine's choice).
	ID string
	// Session is the recording a replay serves or a fork forks.
	Session *session.Session
	// DriftPolicy applies to replay and to a fork's served prefix: Strict (default) or Warn.
	DriftPolicy replay.DriftPolicy
	// AtStep, Overrides and OnMiss describe a fork; Goal, when set, is what its result says was reached
	// or missed.
	AtStep    int64
	Overrides replay.Overrides
	OnMiss    replay.OnMiss
	Goal      *replay.Goal
	// Upstreams are the base URLs by provider name; a provider without one cannot go live. Replay
	// never goes live, whatever is set here.
	Upstreams map[string]string
	// APIKeys are provider credentials held by the proxy, by provider name. When one is set, the
	// agent's credential (a placeholder) is replaced; otherwise the agent's own is passed through. A
	// key is redacted from the recording and withheld from every answer to the agent.
	APIKeys map[string]string
	// Tools are the HTTP tool backends by tool name: POST /v1/tools/{name} forwards the arguments.
	Tools map[string]string
	// MCPServers are MCP servers behind the streamable HTTP transport, by name, mounted at
	// /mcp/{name}: their calls are recorded as tool events "<name>/<method>" (see internal/mcpproxy).
	MCPServers map[string]string
	// Secrets are redacted wherever they appear; the API keys are added to them.
	Secrets []string
	// Keys seal the vault of redacted secrets (optional).
	Keys redact.KeyProvider
	// Workspace is the git work tree whose HEAD the recorder stamps (START, SUSPEND).
	Workspace string
	// Client sends upstream requests to providers and tool backends (default: a client with a 10
	// minute timeout that keeps an idle connection for each concurrent call). Redirects are never followed, whatever the client says: a 3xx is the upstream's
	// answer, passed to the agent and recorded, so a credential the proxy holds never reaches another host.
	Client *http.Client
	// ShutdownTimeout bounds how long Run waits, once its context is done, for the calls in flight: half
	// of it for them to finish, then they are cut (their upstream requests canceled, each recorded as
	// an error event) and the rest for that to be recorded. The session is committed either way.
	// Default 30s.
	ShutdownTimeout time.Duration
	// BodyReadTimeout bounds the reading of a request body (default 1 minute): a client that trickles
	// one gets 408 and holds nothing.
	BodyReadTimeout time.Duration
	// Registerer receives the proxy's metrics (default: a registry of its own, served on /metrics).
	Registry *prometheus.Registry
	// Config is the engine configuration the rest is added to (entropy sources, environment, Logf).
	Config replay.Config
}

// Outcome is how a run ended.
type Outcome struct {
	Mode   Mode
	Record *replay.RecordResult
	Replay *replay.ReplayResult
	Fork   *replay.ForkResult
	// Err is the engine's error: for a replay, the drift that failed it.
	Err error
}

// Server is one proxy run: the engine's AgentContext behind HTTP.
type Server struct {
	opts      Options
	providers []*Provider
	provider  *Provider // the one the session records
	redactor  *redact.Redactor
	// withhold keeps the credentials the proxy holds for the agent out of every answer.
	withhold *redact.Withholder
	// vault holds the recording's secrets once Run has opened it (nil without one).
	vault     *redact.Vault
	upstreams map[string]*upstream
	tools     map[string]replay.Tool
	metrics   *metrics
	mux       *http.ServeMux

	// calls is canceled to cut the calls still in flight at shutdown.
	calls      context.Context
	cancelCall context.CancelFunc

	mu       sync.Mutex
	ac       replay.AgentContext
	root     context.Context
	lanes    map[string]*replay.NamedLane
	closing  bool
	inflight sync.WaitGroup
	ready    chan struct{}
	stop     chan struct{}
	// shapes are the served calls whose recorded answer had another shape than the request asked for.
	shapes []*replay.DriftError
}

// New checks the options and builds the server. Providers are the model APIs served.
func New(opts Options, providers ...*Provider) (*Server, error) {
	if len(providers) == 0 {
		providers = Providers
	}
	switch opts.Mode {
	case Record:
	case Replay, Fork:
		if opts.Session == nil {
			return nil, fmt.Errorf("%s mode needs a recorded session", opts.Mode)
		}
	default:
		return nil, fmt.Errorf("mode %q: use record, replay or fork", opts.Mode)
	}
	switch opts.DriftPolicy {
	case "":
		opts.DriftPolicy = replay.Strict
	case replay.Strict, replay.Warn:
	default:
		return nil, fmt.Errorf("drift policy %q: use Strict or Warn (the proxy never sends a replayed call live)", opts.DriftPolicy)
	}
	if err := CheckMCPServers(opts.MCPServers, opts.Mode); err != nil {
		return nil, err
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Minute, Transport: upstreamTransport()}
	}
	client := *opts.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	opts.Client = &client
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	if opts.BodyReadTimeout <= 0 {
		opts.BodyReadTimeout = time.Minute
	}
	s := &Server{opts: opts, providers: providers, upstreams: map[string]*upstream{}, tools: map[string]replay.Tool{},
		lanes: map[string]*replay.NamedLane{}, ready: make(chan struct{}), stop: make(chan struct{})}
	s.calls, s.cancelCall = context.WithCancel(context.Background())
	var err error
	if s.metrics, err = newMetrics(opts.Registry); err != nil {
		return nil, err
	}
	if opts.Session != nil && opts.Session.Meta.Provider != "" {
		if opts.Provider != "" && opts.Provider != opts.Session.Meta.Provider {
			return nil, fmt.Errorf("session %s records %s, not %s", opts.Session.Meta.ID, opts.Session.Meta.Provider, opts.Provider)
		}
		opts.Provider = opts.Session.Meta.Provider
	}
	if opts.Provider == "" {
		opts.Provider = providers[0].Name
	}
	for _, p := range providers {
		if p.Name == opts.Provider {
			s.provider = p
		}
	}
	if s.provider == nil {
		return nil, fmt.Errorf("provider %q is not one this proxy speaks", opts.Provider)
	}
	s.redactor = opts.Config.Redactor
	if s.redactor == nil {
		s.redactor = redact.New(redact.BuiltinPatterns())
	}
	s.withhold = redact.NewWithholder()
	for _, key := range opts.APIKeys {
		if key != "" {
			opts.Secrets = append(opts.Secrets, key)
			// The agent holds a placeholder so that it never reads the key: an upstream that echoes
			// the key (a 401 quoting it) is answered with its token, and the vault marks it, so
			// that a replay withholds it again.
			s.withhold.Add(key)
			s.redactor.MarkWithheld(key)
		}
	}
	s.opts.Secrets = opts.Secrets
	if opts.Mode != Replay {
		// Replay is built without any upstream, so that zero upstream calls holds by construction.
		p := s.provider
		if base := opts.Upstreams[p.Name]; base != "" {
			u := &upstream{p: p, base: base, client: opts.Client, key: opts.APIKeys[p.Name], counter: s.metrics.upstream}
			if opts.Mode == Fork {
				u.expand = recordedChains(p.Codec, opts.Session, func() *redact.Vault { return s.vault })
			}
			u.sendAsReceived = opts.Mode == Record
			s.upstreams[p.Name] = u
			if p.CountTokensPath != "" {
				s.tools[countTokensTool(p)] = u.countTokens
			}
		}
		for name, url := range opts.Tools {
			s.tools[name] = httpTool(opts.Client, url, s.metrics.upstream)
		}
	}
	s.routes()
	return s, nil
}

// maxIdleUpstreamConns is how many idle keep-alive connections the default client keeps to one upstream:
// as many as an agent's concurrent lanes may use at once.
const maxIdleUpstreamConns = 64

// upstreamTransport is the default client's transport: http.DefaultTransport's settings (proxy from the
// environment, HTTP/2, its timeouts), but keeping an idle connection for each call an agent may have in
// flight. DefaultTransport keeps two a host, so a third concurrent call would open, and then close, a
// connection of its own each time: a TCP (and TLS) handshake added to the call.
func upstreamTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = maxIdleUpstreamConns
	return t
}

// Handler is the proxy's HTTP interface.
func (s *Server) Handler() http.Handler { return s.mux }

// Ready is closed once the session is open and requests are served.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// harness parks the run until the proxy is told to stop, exposing its AgentContext to the handlers.
func (s *Server) harness(ctx context.Context, ac replay.AgentContext) error {
	s.mu.Lock()
	s.ac, s.root = ac, ctx
	s.mu.Unlock()
	close(s.ready)
	<-s.stop
	return nil
}

// Run runs the engine until ctx is done, then stops taking requests, waits for those in flight and
// lets the engine close and commit the session. The session is committed only here: a process killed
// before leaves an uncommitted session directory, never a corrupt committed one.
func (s *Server) Run(ctx context.Context) *Outcome {
	cfg := s.opts.Config
	cfg.Codec, cfg.Redactor, cfg.Keys, cfg.Workspace = s.model(), s.redactor, s.opts.Keys, s.opts.Workspace
	cfg.Secrets = append(cfg.Secrets, s.opts.Secrets...)
	// The harness parks until the proxy is stopped; the agent runs in another process, whose end the
	// proxy does not see.
	cfg.RunEnd = func(error) ledger.RunEnd { return ledger.RunEnd{How: ledger.EndStopped} }
	engineCtx := context.WithoutCancel(ctx)
	if err := s.learnVault(engineCtx); err != nil {
		s.close()
		return &Outcome{Mode: s.opts.Mode, Err: err}
	}
	done := make(chan *Outcome, 1)
	go func() {
		out := &Outcome{Mode: s.opts.Mode}
		switch s.opts.Mode {
		case Record:
			out.Record, out.Err = replay.Record(engineCtx, replay.RecordOptions{Config: cfg, Dir: s.opts.Dir, ID: s.opts.ID,
				Model: s.liveModel(), Tools: s.tools}, s.harness)
		case Replay:
			out.Replay, out.Err = replay.Replay(engineCtx, replay.ReplayOptions{Config: cfg, Session: s.opts.Session,
				DriftPolicy: s.opts.DriftPolicy}, s.harness)
		case Fork:
			out.Fork, out.Err = replay.Fork(engineCtx, replay.ForkOptions{Config: cfg, Parent: s.opts.Session, Dir: s.opts.Dir, ID: s.opts.ID,
				AtStep: s.opts.AtStep, Model: s.liveModel(), Overrides: s.opts.Overrides, OnMiss: s.opts.OnMiss, Goal: s.opts.Goal,
				DriftPolicy: s.opts.DriftPolicy, LiveTools: s.mcpLiveTools()}, s.harness)
		}
		done <- out
	}()
	select {
	case <-ctx.Done():
	case out := <-done: // the engine refused to start: the harness never ran
		s.close()
		return out
	}
	s.close()
	grace := s.opts.ShutdownTimeout / 2
	if !s.waitInflight(grace) {
		if logf := s.opts.Config.Logf; logf != nil {
			logf("Cut the calls still in flight %s after the run was told to stop", grace)
		}
		s.cancelCall()
		s.waitInflight(s.opts.ShutdownTimeout - grace)
	}
	s.cancelCall()
	close(s.stop)
	out := <-done
	if out.Replay != nil {
		s.mu.Lock()
		out.Replay.Drifts = append(out.Replay.Drifts, s.shapes...)
		s.mu.Unlock()
	}
	return out
}

// waitInflight waits at most d for the requests in flight and says whether they all finished.
func (s *Server) waitInflight(d time.Duration) bool {
	idle := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(idle)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}

// callContext is the context of a call admitted into the run: the request's, cut as well when the
// run cuts the calls in flight at shutdown.
func (s *Server) callContext(r *http.Request) context.Context {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.calls, cancel)
	context.AfterFunc(ctx, func() { stop() }) // the request's context ends when its handler returns
	return ctx
}

// learnVault makes the secrets the recording redacted secrets of this run too, so a replayed or
// forked request that carries one is redacted — and matched — as it was when it was recorded.
func (s *Server) learnVault(ctx context.Context) error {
	sess := s.opts.Session
	if sess == nil || s.opts.Keys == nil || sess.Dir == "" {
		return nil
	}
	sealed, err := os.ReadFile(filepath.Join(sess.Dir, session.VaultFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	v, err := redact.OpenVault(ctx, s.opts.Keys, sealed)
	if err != nil {
		return fmt.Errorf("opening the vault of session %s: %w", sess.Meta.ID, err)
	}
	for _, secret := range v.Secrets() {
		s.redactor.AddLiteral("recorded-secret", secret)
	}
	for _, secret := range v.Withheld() {
		s.withhold.Add(secret)
		s.redactor.MarkWithheld(secret)
	}
	s.vault = v
	return nil
}

func (s *Server) close() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
}

// acquire admits a request while the run is open; release must follow.
func (s *Server) acquire() (replay.AgentContext, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
		return nil, errShuttingDown
	case s.ac == nil:
		return nil, errNotReady
	}
	s.inflight.Add(1)
	return s.ac, nil
}

func (s *Server) release() { s.inflight.Done() }

var (
	errShuttingDown = errors.New("the proxy is shutting down: the session is being committed")
	errNotReady     = errors.New("the proxy is not ready: the session is not open yet")
)

// lane returns ctx bound to the lane the X-Rewind-Lane header names: the main lane "0" when the header
// is absent or "0", and otherwise the lane "0/<name>" — the same lane for the same name in every run,
// whichever request arrives first.
func (s *Server) lane(ctx context.Context, name string) (context.Context, error) {
	if name == "" || name == "0" {
		return ctx, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.lanes[name]
	if !ok {
		var err error
		if l, err = replay.NewNamedLane(s.root, name); err != nil {
			return nil, err
		}
		s.lanes[name] = l
	}
	return l.Bind(ctx), nil
}

// model is the codec recorded on model calls. A session holds one provider's calls.
func (s *Server) model() replay.Codec { return s.provider.Codec }

// liveModel is the live boundary: the provider's upstream, or nil (no live calls).
func (s *Server) liveModel() replay.Model {
	if u, ok := s.upstreams[s.provider.Name]; ok {
		return u
	}
	return nil
}
