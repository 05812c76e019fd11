package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
)

// httpTool is a tool backend over HTTP: the arguments are POSTed as JSON and a 2xx JSON answer is the
// result (JSON a session can hold: no repeated key, valid UTF-8); any other answer is the tool's error, recorded as such.
func httpTool(client *http.Client, url string, counter func(provider, outcome string)) replay.Tool {
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(args))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			counter("tool", "error")
			return nil, withoutURL(err, "the tool's backend")
		}
		defer resp.Body.Close()
		counter("tool", fmt.Sprint(resp.StatusCode))
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode/100 != 2 {
			return nil, failureOf(&http.Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body))})
		}
		if err := checkJSON(body); err != nil {
			return nil, fmt.Errorf("the tool's answer of %d bytes cannot be recorded: %w", len(body), err)
		}
		return json.RawMessage(body), nil
	}
}
