package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// upstreamErrorName is the SerializedError name of an upstream HTTP error; its message is the JSON of
// an upstreamFailure, so a replay answers with the status, body and Retry-After the recording got.
const upstreamErrorName = "UpstreamHTTPError"

// upstreamFailure is an upstream's non-2xx answer as recorded.
type upstreamFailure struct {
	Status      int    `json:"status"`
	RetryAfter  string `json:"retryAfter,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	// Location is a redirect's target: the proxy follows no redirect, the agent sees it as sent.
	Location string `json:"location,omitempty"`
	// Headers are the answer headers SDKs read (answerHeaders): request id, retry advice, limits.
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body"`
}

// maxUpstreamBody bounds what is read of an upstream answer.
const maxUpstreamBody = 64 << 20

// upstream is a live provider over HTTP: the engine's Model and StreamingModel.
type upstream struct {
	p      *Provider
	base   string
	client *http.Client
	// key replaces the agent's credential when set.
	key     string
	counter func(provider, outcome string)
	// expand, when set, rewrites a request before it goes upstream (a fork's recorded chains).
	expand func(session.Request) (session.Request, error)
	// sendAsReceived forwards the agent's own body when the call carries one (recording: nothing
	// edits the request, and its bytes are more faithful than a codec round trip).
	sendAsReceived bool
}

type wireKey struct{}

// wire carries the body the agent sent from the handler to the upstream, and the live answer's
// headers back before its first streamed chunk.
type wire struct {
	sent    []byte
	headers func(map[string]string)
}

func withWire(ctx context.Context, w *wire) context.Context {
	return context.WithValue(ctx, wireKey{}, w)
}

func wireOf(ctx context.Context) *wire {
	w, _ := ctx.Value(wireKey{}).(*wire)
	return w
}

// body is the wire body of req: the agent's own when sendAsReceived, otherwise req denormalized,
// rewritten by expand first.
func (u *upstream) body(ctx context.Context, req session.Request) ([]byte, error) {
	if w := wireOf(ctx); u.sendAsReceived && w != nil && w.sent != nil {
		return w.sent, nil
	}
	if u.expand != nil {
		var err error
		if req, err = u.expand(req); err != nil {
			return nil, err
		}
	}
	return u.p.Codec.DenormalizeRequest(req)
}

type callKey struct{}

// callInfo is the part of the agent's request that travels upstream but is never recorded: its
// credential and forwarded headers, and its query string (the Anthropic SDK's ?beta=true, a
// gateway's api-version, or a key some gateways take there: routing, never part of the call).
type callInfo struct {
	header http.Header
	path   string
	query  string
}

func withCall(ctx context.Context, c callInfo) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

func (u *upstream) request(ctx context.Context, path string, body []byte) (*http.Response, error) {
	info, _ := ctx.Value(callKey{}).(callInfo)
	if path == "" {
		path = u.p.Path
	}
	target := strings.TrimSuffix(u.base, "/") + path
	if info.query != "" {
		target += "?" + info.query
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range u.p.Forward {
		if v := info.header.Values(h); len(v) > 0 {
			req.Header[http.CanonicalHeaderKey(h)] = v
		}
	}
	switch {
	case u.key != "":
		req.Header.Set(u.p.AuthHeader, u.p.AuthPrefix+u.key)
	case info.header != nil:
		for _, h := range append([]string{u.p.AuthHeader}, u.p.AltAuthHeaders...) {
			if v := info.header.Get(h); v != "" {
				req.Header.Set(h, v)
			}
		}
	}
	resp, err := u.client.Do(req)
	if err != nil {
		u.count("error")
		return nil, withoutURL(err, "the upstream")
	}
	u.count(fmt.Sprint(resp.StatusCode))
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, failureOf(resp)
	}
	return resp, nil
}

func (u *upstream) count(outcome string) {
	if u.counter != nil {
		u.counter(u.p.Name, outcome)
	}
}

// failureOf records a non-2xx answer as the error the engine stores.
func failureOf(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	f := upstreamFailure{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"),
		ContentType: resp.Header.Get("Content-Type"), Location: resp.Header.Get("Location"), Headers: answerHeaders(resp.Header), Body: string(body)}
	msg, _ := json.Marshal(f)
	return &session.SerializedError{Name: upstreamErrorName, Message: string(msg)}
}

// failureFrom reads an upstream failure back from a recorded or live error.
func failureFrom(err error) (upstreamFailure, bool) {
	var se *session.SerializedError
	if !errors.As(err, &se) || se.Name != upstreamErrorName {
		return upstreamFailure{}, false
	}
	var f upstreamFailure
	if json.Unmarshal([]byte(se.Message), &f) != nil || f.Status == 0 {
		return upstreamFailure{}, false
	}
	return f, true
}

// Create implements replay.Model.
func (u *upstream) Create(ctx context.Context, req session.Request) (*session.Response, error) {
	body, err := u.body(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, err := u.request(ctx, "", body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
	if err != nil {
		return nil, fmt.Errorf("reading the %s answer: %w", u.p.Name, err)
	}
	if json.Valid(data) {
		if err := session.CheckJSONText(data); err != nil {
			return nil, fmt.Errorf("the %s answer cannot be recorded faithfully: %w", u.p.Name, err)
		}
	}
	out, err := u.p.Codec.NormalizeResponse(data)
	if err != nil {
		return nil, fmt.Errorf("the %s answer: %w", u.p.Name, err)
	}
	if err := checkAssembled(u.p, out); err != nil {
		return nil, err
	}
	out.Headers = answerHeaders(resp.Header)
	return &out, nil
}

// checkAssembled refuses a response whose assembled form repeats a key (tool input assembled from
// argument deltas can, though every event was sound): it could be recorded but never read back.
func checkAssembled(p *Provider, out session.Response) error {
	doc, err := json.Marshal(out)
	if err == nil {
		err = session.CheckJSONText(doc)
	}
	if err != nil {
		return fmt.Errorf("the %s answer cannot be recorded faithfully: %w", p.Name, err)
	}
	return nil
}

// Stream implements replay.StreamingModel: each server-sent event is checked and handed to emit as it
// arrives, and the response is what the codec assembles from the whole stream. An answer that is not
// an event stream, or that does not open the way the provider's streams do, is refused before the
// agent sees any of it; an event that is not sound JSON text (invalid UTF-8, a repeated key, not JSON)
// ends the stream there, so the agent gets exactly the events the recording holds.
//
// A stream that ends before its last event (message_stop, [DONE], response.completed), its body cut
// or its connection dropped, without an error event saying why, is truncated: Stream returns the
// response its events assemble to, when they do, together with a StreamTruncated error, so the call
// is recorded with both and a replay ends the stream where this one ended.
func (u *upstream) Stream(ctx context.Context, req session.Request, emit func(json.RawMessage) error) (*session.Response, error) {
	body, err := u.body(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, err := u.request(ctx, "", body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return nil, fmt.Errorf("the %s answer to a streaming request is %q, not an event stream", u.p.Name, resp.Header.Get("Content-Type"))
	}
	headers := answerHeaders(resp.Header)
	if w := wireOf(ctx); w != nil && w.headers != nil {
		w.headers(headers)
	}
	var raw bytes.Buffer
	opened, ended, errored, events := false, false, false, 0
	err = readEvents(io.LimitReader(resp.Body, maxUpstreamBody), func(name string, data []byte) error {
		if err := checkEvent(name, data); err != nil {
			return eventError{fmt.Errorf("the %s stream: %w", u.p.Name, err)}
		}
		if !opened {
			switch {
			case string(data) == "[DONE]":
				return eventError{fmt.Errorf("the %s stream ended before its first %s", u.p.Name, u.p.streamUnit())}
			case u.p.StreamOpen == "" || name == u.p.StreamOpen:
				opened = true
			case name != "ping" && name != "error":
				return eventError{fmt.Errorf("the %s stream begins with %q, not %s", u.p.Name, name, u.p.StreamOpen)}
			}
		}
		writeEvent(&raw, name, data)
		events++
		if c := u.p.Chunk(name, data); c != nil {
			if err := emit(c); err != nil {
				return eventError{err}
			}
		}
		ended = ended || u.p.ends(name, data)
		errored = errored || streamError(name, data)
		return nil
	})
	var cut error // the stream broke off: how
	var ee eventError
	switch {
	case err == nil:
	case ended && ctx.Err() != nil:
		// An agent that hangs up once the finishing event reached it (the OpenAI SDK closes at [DONE])
		// cancels the read of what the upstream still sends; the answer was whole, so it is kept.
	case errors.As(err, &ee):
		return nil, ee.err
	case ctx.Err() != nil || !opened:
		return nil, err // the agent left, or the call was cut at shutdown: not the upstream's doing
	default:
		cut = err
	}
	if !opened {
		return nil, fmt.Errorf("the %s stream ended before its first %s", u.p.Name, u.p.streamUnit())
	}
	var truncated error
	if !ended && !errored {
		how := "its body ended"
		if cut != nil {
			how = "its connection broke (" + cut.Error() + ")"
		}
		truncated = &session.SerializedError{Name: session.ErrorNameStreamTruncated,
			Message: fmt.Sprintf("the %s stream was cut off after %d events, before its last: %s", u.p.Name, events, how)}
	}
	out, _, err := u.p.Codec.NormalizeStream(raw.Bytes())
	if err == nil {
		err = checkAssembled(u.p, out)
	}
	if err != nil {
		if truncated != nil {
			return nil, truncated // what arrived assembles to nothing: the chunks are recorded alone
		}
		return nil, fmt.Errorf("the %s stream: %w", u.p.Name, err)
	}
	out.Headers = headers
	return &out, truncated
}

// eventError is an error of the event callback, not of the read: the stream was refused, or the
// agent could not be written to.
type eventError struct{ err error }

func (e eventError) Error() string { return e.err.Error() }

// streamError reports whether an event is the provider's in-stream error: the stream then ended for
// a reason the provider gave, and is not truncated.
func streamError(name string, data []byte) bool {
	if name == "error" {
		return true
	}
	var doc struct {
		Error json.RawMessage `json:"error"`
	}
	return bytes.Contains(data, []byte(`"error"`)) && json.Unmarshal(data, &doc) == nil && len(doc.Error) > 0 && string(doc.Error) != "null"
}

// checkEvent refuses a server-sent event the recording could not hold as the agent got it.
func checkEvent(name string, data []byte) error {
	if !utf8.ValidString(name) {
		return fmt.Errorf("event name %q is not valid UTF-8", name)
	}
	if data == nil || string(data) == "[DONE]" {
		return nil
	}
	if !json.Valid(data) {
		return fmt.Errorf("the data of event %q is not JSON", name)
	}
	if err := session.CheckJSONText(data); err != nil {
		return fmt.Errorf("the data of event %q: %w", name, err)
	}
	return nil
}

// writeEvent appends an event as the codec's NormalizeStream reads it.
func writeEvent(b *bytes.Buffer, name string, data []byte) {
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	if data != nil {
		for _, line := range bytes.Split(data, []byte("\n")) {
			b.WriteString("data: ")
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	b.WriteByte('\n')
}

// readEvents splits a text/event-stream into events as they arrive, the way the SDKs do: "event" names
// one, "data" lines accumulate (joined by "\n"), ":" lines are comments, a blank line completes it, and
// an event with neither a name nor data is none.
func readEvents(r io.Reader, event func(name string, data []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var name string
	var data []byte
	for {
		line, err := br.ReadBytes('\n')
		if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
			if errors.Is(err, io.EOF) {
				return nil // an event cut off at the end is the codec's to report
			}
			return err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) == 0 {
			if name != "" || data != nil {
				if err := event(name, data); err != nil {
					return err
				}
			}
			name, data = "", nil
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			switch {
			case data != nil:
				data = append(append(data, '\n'), value...)
			case len(value) > 0:
				data = append([]byte{}, value...)
			}
		}
	}
}

// countTokensTool is the tool name token counting is recorded under; '@' keeps it apart from the
// names --tool accepts.
func countTokensTool(p *Provider) string { return "count_tokens@" + p.Name }

// countTokens forwards a token counting request; the engine records it as a tool call.
func (u *upstream) countTokens(ctx context.Context, args json.RawMessage) (any, error) {
	resp, err := u.request(ctx, u.p.CountTokensPath, args)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if err := checkJSON(data); err != nil {
		return nil, fmt.Errorf("the %s token count cannot be recorded: %w", u.p.Name, err)
	}
	return json.RawMessage(data), nil
}

// withoutURL is a transport error without the URL Go's HTTP client writes into it: a backend's URL may
// carry its key in the query (a gateway's, a tool's), and this error is recorded in the session and
// answered to the agent. Whom names the other end instead.
func withoutURL(err error, whom string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s to %s: %w", ue.Op, whom, ue.Err)
	}
	return err
}
