package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentrewind/agentrewind/internal/engine/fingerprint"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/proxyargs"
)

// Headers an agent may send to place its calls.
const (
	// HeaderLane names the concurrent branch a call belongs to: absent or "0" is the main lane "0";
	// any other name (1 to 64 of A-Z a-z 0-9 . _ -) is the lane "0/<name>", the same in every run.
	HeaderLane = "X-Rewind-Lane"
	// HeaderSite names the call site, the strongest matching key; the default is the endpoint's
	// ("anthropic.messages", "openai.chat_completions", "anthropic.count_tokens", "tool.<name>"; entropy
	// draws are sited by their source). At most 128 printable characters.
	HeaderSite = "X-Rewind-Site"
)

// Response headers of a drift.
const (
	HeaderDriftStep    = "X-Rewind-Drift-Step"
	HeaderDriftSite    = "X-Rewind-Drift-Call-Site"
	HeaderNearestStep  = "X-Rewind-Nearest-Step"
	maxSiteLen         = 128
	outcomeOK          = "ok"
	outcomeDrift       = "drift"
	outcomeUpstreamErr = "upstream_error"
	outcomeClientErr   = "client_error"
	outcomeError       = "error"
	// outcomeCut ends an answer whose stream broke off by dropping the connection, as the upstream's
	// did, so that an SDK reports the cut instead of taking what came for the whole answer. It is
	// counted as an error.
	outcomeCut = "cut"
)

func (s *Server) routes() {
	mux := http.NewServeMux()
	for _, p := range s.providers {
		mux.HandleFunc(p.Path, s.count(p.Site, s.post(p, s.handleModel(p))))
		if p.CountTokensPath != "" {
			mux.HandleFunc(p.CountTokensPath, s.count(p.Name+".count_tokens", s.post(p, s.handleCountTokens(p))))
		}
	}
	p := s.provider
	mux.HandleFunc("/v1/tools/{name}", s.count("tools", s.post(p, s.handleTool)))
	mux.HandleFunc("/v1/entropy/{source}", s.count("entropy", s.handleEntropy))
	mux.HandleFunc("/v1/ledger", s.count("ledger", s.post(p, s.handleLedger)))
	mux.HandleFunc("/v1/checkpoint", s.count("checkpoint", s.post(p, s.handleCheckpoint)))
	s.mountMCP(mux)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", s.handleReady)
	mux.Handle("/metrics", promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", s.count("unknown", func(w http.ResponseWriter, r *http.Request) string {
		return s.writeError(w, s.provider, http.StatusNotFound,
			fmt.Sprintf("%s %s is not an endpoint of the rewind proxy (it serves POST %s)", r.Method, r.URL.Path, s.provider.Path))
	}))
	s.mux = mux
}

// handler answers a request and says how it went, for the request counter.
type handler func(w http.ResponseWriter, r *http.Request) string

func (s *Server) count(endpoint string, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		outcome := h(w, r)
		if outcome == outcomeCut {
			s.metrics.requests.WithLabelValues(endpoint, string(s.opts.Mode), outcomeError).Inc()
			panic(http.ErrAbortHandler) // net/http drops the connection without ending the body
		}
		s.metrics.requests.WithLabelValues(endpoint, string(s.opts.Mode), outcome).Inc()
	}
}

func (s *Server) post(p *Provider, h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) string {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			return s.writeError(w, p, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use POST", r.Method, r.URL.Path))
		}
		return h(w, r)
	}
}

// HealthHandler serves only /healthz, /readyz and /metrics: what a kubelet probe or a scraper on the
// pod network may reach while the model API itself listens on loopback, beside the agent.
func (s *Server) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", s.handleReady)
	mux.Handle("/metrics", promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{}))
	return mux
}

func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	ready := s.ac != nil && !s.closing
	s.mu.Unlock()
	if !ready {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

// writeError answers in the provider's error shape.
func (s *Server) writeError(w http.ResponseWriter, p *Provider, status int, message string) string {
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusConflict || status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge {
		w.Header().Set("X-Should-Retry", "false") // the same request would fail the same way
	}
	w.WriteHeader(status)
	_, _ = w.Write(p.ErrorBody(status, s.withhold.String(message)))
	if status < 500 && status != http.StatusConflict {
		return outcomeClientErr
	}
	return outcomeError
}

// readBody reads a request body of at most MaxBodyBytes within the body read timeout.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, p *Provider) ([]byte, string, bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyReadTimeout)) // not every ResponseWriter can
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	_ = rc.SetReadDeadline(time.Time{})
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		return nil, s.writeError(w, p, http.StatusRequestTimeout,
			fmt.Sprintf("the request body did not arrive within %s", s.opts.BodyReadTimeout)), false
	case errors.As(err, &tooLarge):
		return nil, s.writeError(w, p, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("the request body is larger than %d bytes, the most the rewind proxy accepts", MaxBodyBytes)), false
	case err != nil:
		return nil, s.writeError(w, p, http.StatusBadRequest, "reading the request body: "+err.Error()), false
	}
	return body, "", true
}

// begin admits a request into the run and places it in its lane; done must be called after.
func (s *Server) begin(w http.ResponseWriter, r *http.Request, p *Provider, defaultSite string) (ac replay.AgentContext, ctx context.Context, site string, outcome string, ok bool) {
	site = r.Header.Get(HeaderSite)
	if site == "" {
		site = defaultSite
	}
	if !validSite(site) {
		return nil, nil, "", s.writeError(w, p, http.StatusBadRequest,
			fmt.Sprintf("%s must be 1 to %d printable characters", HeaderSite, maxSiteLen)), false
	}
	if site != defaultSite && s.reservedSite(site) {
		return nil, nil, "", s.writeError(w, p, http.StatusBadRequest,
			fmt.Sprintf("%s %q is another endpoint's own call site", HeaderSite, site)), false
	}
	ac, err := s.acquire()
	if err != nil {
		w.Header().Set("Retry-After", "1")
		return nil, nil, "", s.writeError(w, p, http.StatusServiceUnavailable, err.Error()), false
	}
	ctx, err = s.lane(s.callContext(r), r.Header.Get(HeaderLane))
	if err != nil {
		s.release()
		return nil, nil, "", s.writeError(w, p, http.StatusBadRequest, HeaderLane+": "+err.Error()), false
	}
	s.learnCredentials(p, r.Header)
	return ac, withCall(ctx, callInfo{header: r.Header, query: r.URL.RawQuery}), site, "", true
}

// reservedSite reports whether site is the default call site of some endpoint (a model or token
// counting endpoint, "tool.<name>", an entropy source, the ledger, the recorder's own): a call sited
// there from another endpoint would be matched against that endpoint's calls.
func (s *Server) reservedSite(site string) bool {
	if strings.HasPrefix(site, "tool.") {
		return true
	}
	switch site {
	case "clock", "random", "uuid", "ledger", "checkpoint", "recorder", "session", "note":
		return true
	}
	for _, p := range s.providers {
		if site == p.Site || site == p.Name+".count_tokens" {
			return true
		}
	}
	return false
}

func validSite(site string) bool {
	if site == "" || len(site) > maxSiteLen || !utf8.ValidString(site) {
		return false
	}
	for _, c := range site {
		if !unicode.IsPrint(c) {
			return false
		}
	}
	return true
}

// learnCredentials makes the agent's own credential a secret, redacted wherever it appears. When the
// proxy holds the key, what the agent sends is a placeholder ("dummy"): it is neither forwarded nor
// learned, or every "dummy" in the conversation would be redacted. A replay forwards nothing and
// cannot tell a placeholder from a key: the secrets it redacts are the recording's, from its vault.
// A credential shorter than a declared secret may be is not learned either.
func (s *Server) learnCredentials(p *Provider, h http.Header) {
	if s.opts.Mode == Replay || s.opts.APIKeys[p.Name] != "" {
		return
	}
	for _, name := range append([]string{p.AuthHeader, "X-Api-Key", "Authorization"}, p.AltAuthHeaders...) {
		v := strings.TrimSpace(h.Get(name))
		if len(v) > len("bearer ") && strings.EqualFold(v[:len("bearer ")], "bearer ") {
			v = strings.TrimSpace(v[len("bearer "):])
		}
		if len(v) >= minAgentCredentialLen {
			s.redactor.AddLiteral("agent-credential", v)
		}
	}
}

// minAgentCredentialLen is the shortest agent credential learned as a secret: the shortest secret a
// recording accepts when declared.
const minAgentCredentialLen = replay.MinDeclaredSecretLen

// handleModel serves the provider's model endpoint, JSON or streamed.
func (s *Server) handleModel(p *Provider) handler {
	return func(w http.ResponseWriter, r *http.Request) string {
		if p != s.provider {
			return s.writeError(w, p, http.StatusNotFound, fmt.Sprintf("this proxy run records %s, not %s", s.provider.Name, p.Name))
		}
		body, outcome, ok := s.readBody(w, r, p)
		if !ok {
			return outcome
		}
		req, err := p.Codec.NormalizeRequest(body)
		if err == nil {
			err = session.CheckJSONText(body)
		}
		if err != nil {
			return s.writeError(w, p, http.StatusBadRequest, "the request is not a valid "+p.Name+" request: "+err.Error())
		}
		ac, ctx, site, outcome, ok := s.begin(w, r, p, p.Site)
		if !ok {
			return outcome
		}
		defer s.release()
		// A call answered from the recording shows the proxy what it is served before the answer is
		// written: its recorded shape and headers.
		var served *session.Event
		stream := streaming(req)
		sw := &sseWriter{w: w, rc: http.NewResponseController(w), p: p, s: s, withheld: s.withhold.Stream()}
		ctx = replay.WithServed(ctx, func(rec *session.Event) {
			served = rec
			if stream && rec.Response != nil {
				sw.headers = s.restoredHeaders(rec.Response.Headers)
			}
		})
		if !stream {
			resp, err := ac.Model(withWire(ctx, &wire{sent: body}), req, replay.Site(site))
			if served != nil && recordedStreamed(served) {
				s.noteShape(served, "a stream", "JSON")
			}
			if err != nil {
				return s.fail(w, r, p, err)
			}
			out, err := p.Codec.DenormalizeResponse(*resp)
			if err != nil {
				return s.writeError(w, p, http.StatusBadGateway, "the response cannot be written back: "+err.Error())
			}
			s.setAnswerHeaders(w, resp.Headers)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(s.withhold.Document(out))
			return outcomeOK
		}
		resp, err := ac.ModelStream(withWire(ctx, &wire{sent: body, headers: func(h map[string]string) { sw.headers = h }}),
			req, sw.emit, replay.Site(site))
		if err != nil {
			if sw.emitted {
				// The stream broke off where the recording's did (or the agent left, or a secret could
				// not be withheld): what was held goes out, then the connection is dropped.
				_ = sw.end()
				return outcomeCut
			}
			return s.fail(w, r, p, err)
		}
		if !sw.emitted {
			// A recording kept without its stream (or a JSON call served to a streaming request): the
			// codec writes the stream that assembles to the response.
			if served != nil && !recordedStreamed(served) {
				s.noteShape(served, "JSON", "a stream")
			}
			chunks, err := p.Codec.SynthesizeStream(*resp)
			if err != nil {
				return s.writeError(w, p, http.StatusBadGateway, "the response cannot be streamed: "+err.Error())
			}
			sw.headers = resp.Headers
			for _, c := range chunks {
				if err := sw.emit(c.Data); err != nil {
					_ = sw.end()
					return outcomeCut
				}
			}
		}
		if err := sw.end(); err != nil {
			return outcomeError
		}
		return outcomeOK
	}
}

func streaming(req session.Request) bool {
	var on bool
	return json.Unmarshal(req.Params["stream"], &on) == nil && on
}

// recordedStreamed reports whether a recorded model call was streamed: its request asked for a stream,
// or it kept one.
func recordedStreamed(rec *session.Event) bool {
	return len(rec.Stream) > 0 || (rec.Request != nil && streaming(*rec.Request))
}

// DriftAnswerShape is the code of a tolerated difference: a call served from the recording in another
// shape than it was recorded in (JSON to a streaming request, or the reverse).
const DriftAnswerShape replay.DriftCode = "AnswerShape"

// noteShape counts a served call whose recorded answer had another shape than the request asked for.
// The answer is rebuilt in the shape asked (the stream its JSON assembles to, or the JSON its stream
// did), so the agent reads the same answer; the request matched, since streaming is no part of a
// fingerprint. Every drift policy tolerates it, and the replay's result lists it as a tolerated drift
// saying so, where a Strict replay would otherwise report nothing.
func (s *Server) noteShape(rec *session.Event, recorded, asked string) {
	d := &replay.DriftError{Step: rec.Step, Kind: session.KindModelCall, Lane: rec.Lane, CallSite: rec.CallSite,
		Fingerprint: rec.RequestHash, Code: DriftAnswerShape,
		Reason: fmt.Sprintf("the recording answered this call as %s and the request asked for %s: it was served as %s rebuilt from the recorded answer; "+
			"tolerated under the %s drift policy, as under every policy, because streaming is no part of a call's fingerprint",
			recorded, asked, asked, s.opts.DriftPolicy)}
	s.mu.Lock()
	s.shapes = append(s.shapes, d)
	s.mu.Unlock()
}

// restoredHeaders are recorded answer headers as the agent is served them: their tokens restored
// from the vault (the proxy withholds its own secrets again when it writes them).
func (s *Server) restoredHeaders(h map[string]string) map[string]string {
	if s.vault == nil || len(h) == 0 {
		return h
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[k] = s.vault.Restore(v)
	}
	return out
}

// sseWriter sends chunks to the agent as server-sent events, in the codec's layout, as soon as the
// proxy's secrets cannot run through them (redact.WithheldStream).
type sseWriter struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	p        *Provider
	s        *Server
	withheld *redact.WithheldStream
	// headers are the answer's headers, sent with the first chunk.
	headers map[string]string
	// emitted is set once the engine handed over a chunk; started once the answer's head is written.
	emitted, started bool
}

func (sw *sseWriter) emit(chunk json.RawMessage) error {
	sw.emitted = true
	out, err := sw.withheld.Next(chunk, sw.p.closesLanes(chunk))
	if err != nil {
		return err
	}
	return sw.write(out)
}

// end sends what is still held back: the stream is over.
func (sw *sseWriter) end() error {
	rest, err := sw.withheld.End()
	if err != nil {
		return err
	}
	return sw.write(rest)
}

func (sw *sseWriter) write(chunks [][]byte) error {
	if len(chunks) == 0 {
		return nil
	}
	if !sw.started {
		sw.s.setAnswerHeaders(sw.w, sw.headers)
		h := sw.w.Header()
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		sw.w.WriteHeader(http.StatusOK)
		sw.started = true
	}
	for _, c := range chunks {
		if _, err := sw.w.Write(sw.p.Codec.RebuildStream([]session.Chunk{{Data: c}})); err != nil {
			return err
		}
	}
	return sw.rc.Flush()
}

// fail answers a failed boundary call: an upstream error as the upstream sent it (live or recorded),
// a drift as 409 naming the step, call site and nearest recorded call, anything else as 502.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, p *Provider, err error) string {
	if f, ok := failureFrom(err); ok {
		// A replayed failure's headers and body are restored from the vault; the proxy's own
		// credentials are withheld from both, live and replayed (a 401 may quote the key).
		s.setAnswerHeaders(w, s.restoredHeaders(f.Headers))
		h := w.Header()
		if f.ContentType != "" {
			h.Set("Content-Type", f.ContentType)
		}
		if f.RetryAfter != "" {
			h.Set("Retry-After", s.withhold.String(f.RetryAfter))
		}
		if f.Location != "" {
			h.Set("Location", s.withhold.String(f.Location))
		}
		w.WriteHeader(f.Status)
		_, _ = w.Write(s.withhold.Document([]byte(f.Body)))
		return outcomeUpstreamErr
	}
	var drift *replay.DriftError
	if errors.As(err, &drift) {
		s.metrics.drifts.WithLabelValues(string(s.opts.Mode), string(drift.Kind)).Inc()
		h := w.Header()
		h.Set(HeaderDriftStep, strconv.FormatInt(drift.Step, 10))
		h.Set(HeaderDriftSite, drift.CallSite)
		if drift.Nearest != nil {
			h.Set(HeaderNearestStep, strconv.FormatInt(drift.Nearest.Step, 10))
		}
		s.writeError(w, p, http.StatusConflict, "rewind proxy: the recording does not hold this request: "+drift.Error())
		return outcomeDrift
	}
	if errors.Is(err, replay.ErrForkHalted) {
		s.writeError(w, p, http.StatusConflict, "rewind proxy: "+err.Error())
		return outcomeDrift
	}
	if errors.Is(err, replay.ErrLiveModelRequired) {
		return s.writeError(w, p, http.StatusBadGateway, fmt.Sprintf("rewind proxy: %v (start it with --%s-upstream)", err, p.Name))
	}
	var utf *fingerprint.InvalidUTF8Error
	var jsonErr *redact.JSONError
	var textErr *redact.TextError
	if errors.As(err, &utf) || errors.As(err, &jsonErr) || errors.As(err, &textErr) {
		return s.writeError(w, p, http.StatusBadRequest, "rewind proxy: the request cannot be recorded: "+err.Error())
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return outcomeClientErr // the agent went away
	}
	// A recorded error renders as its message alone, the text the live error had: the agent reads the
	// same words live and replayed.
	msg := err.Error()
	var se *session.SerializedError
	if errors.As(err, &se) {
		msg = se.Message
	}
	return s.writeError(w, p, http.StatusBadGateway, "rewind proxy: the upstream call failed: "+s.redactor.String(msg))
}

// checkJSON refuses a body that is not JSON, or JSON that a session could not hold as sent (a
// repeated key, invalid UTF-8): the rule session.Open applies to what is stored.
func checkJSON(body []byte) error {
	if !json.Valid(body) {
		return errors.New("not JSON")
	}
	return session.CheckJSONText(body)
}

// handleCountTokens records token counting as a tool call: forwarded live when recording, served
// from the recording when replaying.
func (s *Server) handleCountTokens(p *Provider) handler {
	return func(w http.ResponseWriter, r *http.Request) string {
		if p != s.provider {
			return s.writeError(w, p, http.StatusNotFound, fmt.Sprintf("this proxy run records %s, not %s", s.provider.Name, p.Name))
		}
		body, outcome, ok := s.readBody(w, r, p)
		if !ok {
			return outcome
		}
		_, err := p.Codec.NormalizeRequest(body)
		if err == nil {
			err = session.CheckJSONText(body)
		}
		if err != nil {
			return s.writeError(w, p, http.StatusBadRequest, "the request is not a valid "+p.Name+" token count request: "+err.Error())
		}
		tool := countTokensTool(p)
		if s.opts.Mode == Record && s.tools[tool] == nil {
			return s.writeError(w, p, http.StatusBadGateway, fmt.Sprintf("rewind proxy: no %s upstream (start it with --%s-upstream)", p.Name, p.Name))
		}
		ac, ctx, site, outcome, ok := s.begin(w, r, p, p.Name+".count_tokens")
		if !ok {
			return outcome
		}
		defer s.release()
		result, err := ac.Tool(ctx, tool, json.RawMessage(body), replay.Site(site))
		if err != nil {
			return s.fail(w, r, p, err)
		}
		return s.writeResult(w, result)
	}
}

// handleTool forwards a tool call to its backend through the engine.
func (s *Server) handleTool(w http.ResponseWriter, r *http.Request) string {
	p := s.provider
	name := r.PathValue("name")
	if !proxyargs.ToolName.MatchString(name) {
		return s.writeError(w, p, http.StatusBadRequest, fmt.Sprintf("tool name %q: use 1 to 64 of A-Z a-z 0-9 . _ -", name))
	}
	body, outcome, ok := s.readBody(w, r, p)
	if !ok {
		return outcome
	}
	if err := checkJSON(body); err != nil {
		return s.writeError(w, p, http.StatusBadRequest, "the tool arguments: "+err.Error())
	}
	if s.opts.Mode == Record && s.tools[name] == nil {
		return s.writeError(w, p, http.StatusNotFound, fmt.Sprintf("no backend for tool %q (start the proxy with --tool %s=URL)", name, name))
	}
	ac, ctx, site, outcome, ok := s.begin(w, r, p, "tool."+name)
	if !ok {
		return outcome
	}
	defer s.release()
	result, err := ac.Tool(ctx, name, json.RawMessage(body), replay.Site(site))
	if err != nil {
		return s.fail(w, r, p, err)
	}
	return s.writeResult(w, result)
}

// handleEntropy draws a clock, random or uuid value through the engine.
func (s *Server) handleEntropy(w http.ResponseWriter, r *http.Request) string {
	p := s.provider
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		return s.writeError(w, p, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: use GET", r.Method, r.URL.Path))
	}
	source := r.PathValue("source")
	if source != "clock" && source != "random" && source != "uuid" {
		return s.writeError(w, p, http.StatusNotFound, fmt.Sprintf("entropy source %q: use clock, random or uuid", source))
	}
	ac, ctx, _, outcome, ok := s.begin(w, r, p, source)
	if !ok {
		return outcome
	}
	defer s.release()
	var v any
	var err error
	switch source {
	case "clock":
		var t time.Time
		if t, err = ac.Clock(ctx); err == nil {
			v = map[string]any{"unixMilli": t.UnixMilli(), "time": t.UTC().Format(time.RFC3339Nano)}
		}
	case "random":
		var f float64
		if f, err = ac.Random(ctx); err == nil {
			v = map[string]any{"random": f}
		}
	case "uuid":
		var id string
		if id, err = ac.UUID(ctx); err == nil {
			v = map[string]any{"uuid": id}
		}
	}
	if err != nil {
		return s.fail(w, r, p, err)
	}
	return writeJSON(w, v)
}

// handleLedger appends the agent's ledger record (AGENT_AUTHORED). A SUSPEND is the agent asking to
// park: the recorder mints the stamp itself (turn index, transcript digest, workspace HEAD) and the
// agent's own fields are dropped; START, ANCHOR and END are the recorder's alone and are refused.
func (s *Server) handleLedger(w http.ResponseWriter, r *http.Request) string {
	p := s.provider
	body, outcome, ok := s.readBody(w, r, p)
	if !ok {
		return outcome
	}
	var rec struct {
		Op string `json:"op"`
	}
	if err := checkJSON(body); err != nil {
		return s.writeError(w, p, http.StatusBadRequest, "the ledger record: "+err.Error())
	}
	if err := json.Unmarshal(body, &rec); err != nil || rec.Op == "" {
		return s.writeError(w, p, http.StatusBadRequest, `a ledger record is a JSON object with an "op" (INTENT, STEP_CLAIMED, STEP_VERIFIED, SUSPEND, RESUME_PROPOSED)`)
	}
	if rec.Op == "START" {
		return s.writeError(w, p, http.StatusBadRequest, "START is minted by the recorder from the workspace it was given, never taken from the agent")
	}
	if rec.Op == "ANCHOR" || rec.Op == "END" {
		return s.writeError(w, p, http.StatusBadRequest, rec.Op+" is minted by the recorder, never taken from the agent (POST /v1/checkpoint asks for an anchor)")
	}
	if !agentOps[rec.Op] {
		return s.writeError(w, p, http.StatusBadRequest, fmt.Sprintf(`ledger op %q: use exactly INTENT, STEP_CLAIMED, STEP_VERIFIED, SUSPEND or RESUME_PROPOSED`, rec.Op))
	}
	ac, ctx, _, outcome, ok := s.begin(w, r, p, "ledger")
	if !ok {
		return outcome
	}
	defer s.release()
	if rec.Op == "SUSPEND" {
		if err := ac.Suspend(ctx); err != nil {
			return s.fail(w, r, p, err)
		}
		return writeJSON(w, map[string]string{"minted": "SUSPEND"})
	}
	if err := ac.Ledger(ctx, json.RawMessage(body)); err != nil {
		return s.writeError(w, p, http.StatusBadRequest, "the ledger record cannot be recorded: "+err.Error())
	}
	return writeJSON(w, map[string]bool{"recorded": true})
}

// agentOps are the ledger ops an agent may write, spelled exactly.
var agentOps = map[string]bool{"INTENT": true, "STEP_CLAIMED": true, "STEP_VERIFIED": true, "SUSPEND": true, "RESUME_PROPOSED": true}

// handleCheckpoint mints a conversation anchor: the recorder's ANCHOR stamp of the latest turn it
// recorded. The run goes on, and is not parked: the anchor is what a rewind verdict can return to.
func (s *Server) handleCheckpoint(w http.ResponseWriter, r *http.Request) string {
	p := s.provider
	ac, ctx, _, outcome, ok := s.begin(w, r, p, "checkpoint")
	if !ok {
		return outcome
	}
	defer s.release()
	if err := ac.Anchor(ctx); err != nil {
		return s.fail(w, r, p, err)
	}
	return writeJSON(w, map[string]string{"minted": "ANCHOR"})
}

// writeResult answers with a tool's or a token count's result, the proxy's own credentials withheld.
func (s *Server) writeResult(w http.ResponseWriter, result json.RawMessage) string {
	return writeJSON(w, json.RawMessage(s.withhold.Document(result)))
}

func writeJSON(w http.ResponseWriter, v any) string {
	w.Header().Set("Content-Type", "application/json")
	if raw, ok := v.(json.RawMessage); ok {
		_, _ = w.Write(raw)
		return outcomeOK
	}
	_, _ = w.Write(marshalNoEscape(v))
	return outcomeOK
}
