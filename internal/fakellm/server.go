package fakellm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// An Endpoint is one of the API operations the server answers.
type Endpoint string

const (
	// AnthropicMessages is Anthropic's POST /v1/messages.
	AnthropicMessages Endpoint = "POST /v1/messages"
	// AnthropicCountTokens is Anthropic's POST /v1/messages/count_tokens. It is never faulted and
	// selects no turn.
	AnthropicCountTokens Endpoint = "POST /v1/messages/count_tokens"
	// OpenAIChatCompletions is OpenAI's POST /v1/chat/completions.
	OpenAIChatCompletions Endpoint = "POST /v1/chat/completions"
	// OpenAIResponses is OpenAI's POST /v1/responses.
	OpenAIResponses Endpoint = "POST /v1/responses"
)

var endpoints = [...]Endpoint{AnthropicMessages, AnthropicCountTokens, OpenAIChatCompletions, OpenAIResponses}

// maxBody bounds a request body; the providers refuse larger ones too.
const maxBody = 32 << 20

// A Request is what the server remembers of one request it received.
type Request struct {
	// Endpoint is the operation, empty for a path the server does not serve.
	Endpoint Endpoint
	// Method and Path are the request line's.
	Method, Path string
	// Body is the request body as received.
	Body []byte
	// Step is the request's step (see Match.Step); 0 when the body was not a valid request.
	Step int
	// Turn is the index in Script.Turns of the turn that answered, -1 for none or Unmatched.
	Turn int
	// Status is the HTTP status answered (200 for an answer a fault broke off), or 499 when the
	// client went away during a slow fault's delay.
	Status int
	// Fault is the fault that decided the answer (rate_limit, server_error or cut), or slow when
	// only a delay was injected; empty for none.
	Fault FaultKind
}

// Server is the fake LLM, an http.Handler safe for concurrent use.
type Server struct {
	script Script
	seed   []byte
	// chains are the Responses API's answered responses, for previous_response_id.
	chains chains

	total atomic.Int64
	per   [len(endpoints)]atomic.Int64

	mu            sync.Mutex
	history       []Request // a ring of the last KeepRequests requests
	next          int       // where the next request goes in history once it is full
	scriptSeen    []int     // per script fault, the requests it applied to so far
	turnSeen      [][]int   // per turn and turn fault, likewise
	unmatchedSeen []int
}

// New returns a server answering from script. It panics when the script is not valid (see
// Script.Validate); Parse and Load return that error instead.
func New(script Script) *Server {
	if err := script.Validate(); err != nil {
		panic("fakellm.New: " + err.Error())
	}
	if script.Created == 0 {
		script.Created = DefaultCreated
	}
	if script.KeepRequests == 0 {
		script.KeepRequests = DefaultKeepRequests
	}
	canonical, err := json.Marshal(script)
	if err != nil {
		panic("fakellm.New: " + err.Error())
	}
	// The server keeps its own copy, so a caller changing its script afterwards changes nothing.
	script = Script{}
	if err := json.Unmarshal(canonical, &script); err != nil {
		panic("fakellm.New: " + err.Error())
	}
	seed := sha256.Sum256(canonical)
	s := &Server{script: script, seed: seed[:], scriptSeen: make([]int, len(script.Faults)), turnSeen: make([][]int, len(script.Turns))}
	for i := range script.Turns {
		s.turnSeen[i] = make([]int, len(script.Turns[i].Faults))
	}
	if script.Unmatched != nil {
		s.unmatchedSeen = make([]int, len(script.Unmatched.Faults))
	}
	return s
}

// Requests is how many requests the server has received, on any path.
func (s *Server) Requests() int64 { return s.total.Load() }

// RequestsTo is how many requests the server has received for endpoint e.
func (s *Server) RequestsTo(e Endpoint) int64 {
	for i, ep := range endpoints {
		if ep == e {
			return s.per[i].Load()
		}
	}
	return 0
}

// LastRequests returns up to n of the most recent requests whose answers are complete, oldest
// first; n <= 0 returns all it keeps.
func (s *Server) LastRequests(n int) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	ordered := append(append([]Request(nil), s.history[s.next:]...), s.history[:s.next]...)
	if n > 0 && n < len(ordered) {
		ordered = ordered[len(ordered)-n:]
	}
	return ordered
}

func (s *Server) remember(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.history) < s.script.KeepRequests {
		s.history = append(s.history, r)
		return
	}
	s.history[s.next] = r
	s.next = (s.next + 1) % len(s.history)
}

// provider is one API's wire format.
type provider interface {
	// decode validates a request body like the provider does and gathers its facts; a non-empty
	// message is the 400 to answer.
	decode(e Endpoint, body []byte) (*facts, string)
	// message is the non-streamed answer body.
	message(a *answer) []byte
	// events is the streamed answer, one server-sent event each.
	events(a *answer) [][]byte
	// countTokens is the count_tokens answer body.
	countTokens(f *facts) []byte
	// streamError is the event a stream ends with when the provider fails mid-stream.
	streamError(message string) []byte
	// errorBody is an error response body; requestID names the request as the provider would.
	errorBody(status int, message, requestID string) []byte
	// requestIDHeader is the response header naming the request.
	requestIDHeader() string
}

// route is the endpoint and provider of a request, or "" and the provider whose 404 fits it best.
func (s *Server) route(r *http.Request) (Endpoint, provider) {
	if r.Method == http.MethodPost {
		switch r.URL.Path {
		case "/v1/messages":
			return AnthropicMessages, anthropicAPI{}
		case "/v1/messages/count_tokens":
			return AnthropicCountTokens, anthropicAPI{}
		case "/v1/chat/completions":
			return OpenAIChatCompletions, openaiAPI{}
		case "/v1/responses":
			return OpenAIResponses, responsesAPI{chains: &s.chains}
		}
	}
	if r.Header.Get("anthropic-version") != "" || r.Header.Get("x-api-key") != "" || strings.HasPrefix(r.URL.Path, "/v1/messages") {
		return "", anthropicAPI{}
	}
	return "", openaiAPI{}
}

// ServeHTTP answers one request from the script.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.total.Add(1)
	rec := Request{Method: r.Method, Path: r.URL.Path, Turn: -1}
	// Recorded last, so a test that has its answer sees the record; a cut connection's too.
	defer func() { s.remember(rec) }()

	endpoint, api := s.route(r)
	rec.Endpoint = endpoint
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	rec.Body = body
	reqID := "req_" + s.id(body, "request")
	if endpoint == "" {
		rec.Status = s.writeError(w, api, http.StatusNotFound, fmt.Sprintf("Not found: %s %s", r.Method, r.URL.Path), reqID)
		return
	}
	for i, ep := range endpoints {
		if ep == endpoint {
			s.per[i].Add(1)
		}
	}
	if readErr != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](readErr); ok {
			status = http.StatusRequestEntityTooLarge
		}
		rec.Status = s.writeError(w, api, status, "reading the request body: "+readErr.Error(), reqID)
		return
	}
	f, invalid := api.decode(endpoint, body)
	if invalid != "" {
		rec.Status = s.writeError(w, api, http.StatusBadRequest, invalid, reqID)
		return
	}
	rec.Step = f.step
	reqID = "req_" + s.id(f.canonic, "request")
	if endpoint == AnthropicCountTokens {
		rec.Status = writeBody(w, api, reqID, "application/json", api.countTokens(f), false)
		return
	}

	index := s.script.selectTurn(f)
	rec.Turn = index
	var turn *Turn
	if index >= 0 {
		turn = &s.script.Turns[index]
	} else {
		turn = s.script.Unmatched
	}
	o := decide(s.faults(index), f.stream)
	rec.Fault = o.fault
	if err := sleep(r.Context(), o.delay); err != nil {
		rec.Status = 499 // the client went away; nothing is written
		return
	}
	switch o.status {
	case http.StatusTooManyRequests:
		w.Header().Set("retry-after", strconv.Itoa(o.retryAfter))
		rec.Status = s.writeError(w, api, o.status, "fakellm: scripted rate limit", reqID)
	case http.StatusInternalServerError:
		rec.Status = s.writeError(w, api, o.status, "fakellm: scripted server error", reqID)
	default:
		rec.Status = http.StatusOK // what an answer broken off by a cut had sent
		rec.Status = s.answer(r.Context(), w, api, f, turn, reqID, o)
	}
}

// An outcome is what the faults applying to a request decide.
type outcome struct {
	fault      FaultKind     // the deciding fault, or slow when only delays apply, for the record
	delay      time.Duration // before answering
	eventDelay time.Duration // between stream events
	status     int           // 429 or 500 answered instead of the turn; 0 answers the turn
	retryAfter int           // seconds, with a 429
	breakOff   FaultKind     // FaultCut or FaultStreamError breaks the answer off; "" lets it finish
	breakAfter int           // events before the break; 0 means half
}

// decide applies faults in order: slow ones add their delays, and the first other one decides.
func decide(faults []Fault, stream bool) outcome {
	var o outcome
	for _, f := range faults {
		o.fault = f.Kind
		switch f.Kind {
		case FaultSlow:
			o.delay += f.Delay.Duration
			o.eventDelay += f.EventDelay.Duration
			continue
		case FaultRateLimit:
			o.status, o.retryAfter = http.StatusTooManyRequests, max(1, f.RetryAfter)
		case FaultServerError:
			o.status = http.StatusInternalServerError
		case FaultStreamError:
			if !stream {
				o.status = http.StatusInternalServerError
				break
			}
			o.breakOff, o.breakAfter = f.Kind, f.CutAfter
		case FaultCut:
			o.breakOff, o.breakAfter = f.Kind, f.CutAfter
		}
		return o
	}
	return o
}

// answer writes turn's answer, paced and broken off as d says, and returns the status.
func (s *Server) answer(ctx context.Context, w http.ResponseWriter, api provider, f *facts, turn *Turn, reqID string, d outcome) int {
	if turn == nil {
		return s.writeError(w, api, http.StatusBadRequest, fmt.Sprintf("fakellm: no scripted turn matches this request (step %d)", f.step), reqID)
	}
	if turn.Error != nil {
		msg := turn.Error.Message
		if msg == "" {
			msg = http.StatusText(turn.Error.Status)
		}
		return s.writeError(w, api, turn.Error.Status, msg, reqID)
	}
	a := s.newAnswer(f, turn)
	if !f.stream {
		return writeBody(w, api, reqID, "application/json", api.message(a), d.breakOff == FaultCut)
	}
	events := api.events(a)
	breakAt := len(events)
	if d.breakOff != "" {
		breakAt = d.breakAfter
		if breakAt == 0 {
			breakAt = max(1, len(events)/2)
		}
		breakAt = min(breakAt, len(events)-1) // a broken stream always misses its end
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set(api.requestIDHeader(), reqID)
	w.Header()["Date"] = nil
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i, e := range events[:breakAt] {
		if i > 0 && d.eventDelay > 0 && sleep(ctx, d.eventDelay) != nil {
			return http.StatusOK
		}
		if _, err := w.Write(e); err != nil {
			return http.StatusOK
		}
		_ = rc.Flush()
	}
	switch d.breakOff {
	case FaultCut:
		abort(rc)
	case FaultStreamError:
		_, _ = w.Write(api.streamError("fakellm: scripted error mid-stream"))
		_ = rc.Flush()
	}
	return http.StatusOK
}

// abort drops the connection mid-answer, as a crashed upstream would: the client sees an
// unexpected EOF rather than the end of a well-formed chunked body.
func abort(rc *http.ResponseController) {
	_ = rc.Flush()
	panic(http.ErrAbortHandler)
}

// writeBody writes a complete body, or with cut the first half of it and then drops the connection.
// Responses carry no Date header, so two runs answer byte for byte the same.
func writeBody(w http.ResponseWriter, api provider, reqID, contentType string, body []byte, cut bool) int {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set(api.requestIDHeader(), reqID)
	w.Header()["Date"] = nil
	if cut {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:len(body)/2])
		abort(http.NewResponseController(w))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
	return http.StatusOK
}

func (s *Server) writeError(w http.ResponseWriter, api provider, status int, message, reqID string) int {
	body := api.errorBody(status, message, reqID)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(api.requestIDHeader(), reqID)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header()["Date"] = nil
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return status
}

// faults are the faults applying to this request, script faults first; turn is the selected turn's
// index or -1 for Unmatched. Counting happens under the lock, so concurrent requests each get a
// distinct number.
func (s *Server) faults(turn int) []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Fault
	pick := func(faults []Fault, seen []int) {
		for i, f := range faults {
			seen[i]++
			if n := seen[i]; n > f.After && (f.Times == 0 || n <= f.After+f.Times) {
				out = append(out, f)
			}
		}
	}
	pick(s.script.Faults, s.scriptSeen)
	switch {
	case turn >= 0:
		pick(s.script.Turns[turn].Faults, s.turnSeen[turn])
	case s.script.Unmatched != nil:
		pick(s.script.Unmatched.Faults, s.unmatchedSeen)
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// id derives a stable identifier from the script, the request and a label: 24 hex digits.
func (s *Server) id(request []byte, label string) string {
	h := sha256.New()
	h.Write(s.seed)
	h.Write(request)
	h.Write([]byte{0})
	h.Write([]byte(label))
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// An answer is a turn rendered for one request, in provider-neutral terms.
type answer struct {
	id        string
	model     string
	created   int64
	text      string
	toolCalls []answerCall
	stop      stop
	input     int64
	output    int64
	chunk     int
	usage     bool // OpenAI: end the stream with a usage chunk
	step      int  // the request's step: the conversation's assistant turns once answered
}

type answerCall struct {
	id, name, arguments string
}

func (s *Server) newAnswer(f *facts, t *Turn) *answer {
	a := &answer{
		id:      s.id(f.canonic, "message"),
		model:   f.model,
		created: s.script.Created,
		text:    t.Text,
		stop:    t.stopOf(),
		input:   f.prompt,
		chunk:   t.chunkSize(&s.script),
		usage:   f.usage,
		step:    f.step,
	}
	if s.script.Model != "" {
		a.model = s.script.Model
	}
	size := len(t.Text)
	for i, c := range t.ToolCalls {
		args := c.arguments()
		a.toolCalls = append(a.toolCalls, answerCall{id: s.id(f.canonic, "tool-call-"+strconv.Itoa(i)), name: c.Name, arguments: args})
		size += len(c.Name) + len(args)
	}
	a.output = estimateTokens(size)
	if t.Usage.InputTokens > 0 {
		a.input = t.Usage.InputTokens
	}
	if t.Usage.OutputTokens > 0 {
		a.output = t.Usage.OutputTokens
	}
	return a
}

// pieces splits s into pieces of at most n bytes without splitting a UTF-8 character (a character
// longer than n is a piece of its own); n <= 0 keeps s whole. An empty s has no pieces.
func pieces(s string, n int) []string {
	if s == "" {
		return nil
	}
	if n <= 0 {
		return []string{s}
	}
	var out []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && end > 0 && !startsCharacter(s[end]) {
			end--
		}
		if end == 0 { // one character longer than n
			end = 1
			for end < len(s) && !startsCharacter(s[end]) {
				end++
			}
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

func startsCharacter(b byte) bool { return b&0xC0 != 0x80 }

// marshal encodes v as the providers do: compact, with <, > and & left as they are.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("fakellm: encoding a response: " + err.Error()) // only plain structs and valid raw JSON reach here
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// canonical is the request as JSON with sorted keys and without the members that only choose how
// the answer is delivered, so a streamed and a non-streamed request get the same ids.
func canonical(obj map[string]json.RawMessage) []byte {
	delete(obj, "stream")
	delete(obj, "stream_options")
	var v any
	b, _ := json.Marshal(obj) // RawMessage members are valid JSON: they were just decoded
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	_ = d.Decode(&v)
	return marshal(v)
}
