package mcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

func TestParseRefusesWhatIsNotAMessageSayingWhere(t *testing.T) {
	for _, tc := range []struct {
		name, frame string
		offset      int64
		notJSON     bool
		reason      string
	}{
		{"not JSON", `{"jsonrpc":"2.0",`, 17, true, "unexpected EOF"},
		{"trailing comma", `{"jsonrpc":"2.0","id":1,"method":"ping",}`, 40, true, "looking for beginning of object key"},
		{"batch", ` [{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 1, false, "batches are not part of MCP"},
		{"two values", `{"jsonrpc":"2.0","id":1,"method":"ping"} {}`, 41, false, "more than one JSON value"},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, 0, false, `"jsonrpc" must be "2.0"`},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, 0, false, `"id" must be a string or a number`},
		{"null request id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, 0, false, `must not be null`},
		{"array params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, 0, false, `"params" must be an object`},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, 0, false, `needs an "id"`},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, 0, false, "exactly one"},
		{"empty", "  ", 0, false, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.frame))
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse(%s) = %v, want a *FrameError", tc.frame, err)
			}
			if fe.Offset != tc.offset || fe.NotJSON != tc.notJSON || !strings.Contains(fe.Reason, tc.reason) {
				t.Errorf("Parse(%s) = %+v, want offset %d, notJSON %v and a reason saying %q", tc.frame, fe, tc.offset, tc.notJSON, tc.reason)
			}
		})
	}
}

func TestParseAndEncodeKeepEveryKindOfMessage(t *testing.T) {
	for _, tc := range []struct {
		frame string
		want  Message
		kind  string
	}{
		{`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}`,
			Message{ID: json.RawMessage(`"a"`), Method: "tools/call", Params: json.RawMessage(`{"name":"x"}`)}, "request"},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
			Message{Method: "notifications/progress", Params: json.RawMessage(`{"progress":1}`)}, "notification"},
		{`{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}`, Message{ID: json.RawMessage(`7`), Result: json.RawMessage(`{"tools":[]}`)}, "response"},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}`,
			Message{ID: json.RawMessage(`null`), Error: &RPCError{Code: -32700, Message: "bad"}}, "response"},
	} {
		got, err := Parse([]byte(tc.frame))
		if err != nil {
			t.Fatalf("Parse(%s): %v", tc.frame, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Parse(%s) (-want +got):\n%s", tc.frame, diff)
		}
		kind := map[bool]string{true: "request"}[got.IsRequest()] + map[bool]string{true: "notification"}[got.IsNotification()] +
			map[bool]string{true: "response"}[got.IsResponse()]
		if kind != tc.kind {
			t.Errorf("%s is a %s, want a %s", tc.frame, kind, tc.kind)
		}
		if again := string(Encode(got)); again != tc.frame {
			t.Errorf("Encode(Parse(%s)) = %s", tc.frame, again)
		}
	}
}

func TestArgsDropWhatChangesBetweenIdenticalCalls(t *testing.T) {
	for _, tc := range []struct{ method, params, want string }{
		{"tools/call", `{"name":"add","arguments":{"a":1},"_meta":{"progressToken":"p-123"}}`, `{"arguments":{"a":1},"name":"add"}`},
		{"initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1.2.3"}}`,
			`{"capabilities":{},"protocolVersion":"2025-06-18"}`},
		{"tools/list", ``, `{}`},
		{"tools/list", `null`, `{}`},
	} {
		got, err := Args(tc.method, json.RawMessage(tc.params))
		if err != nil || string(got) != tc.want {
			t.Errorf("Args(%s, %s) = %s, %v; want %s", tc.method, tc.params, got, err, tc.want)
		}
	}
}

func TestAnswerOfRestoresRecordedErrorsWithTheirCodes(t *testing.T) {
	recorded := RecordedError(&RPCError{Code: -32602, Message: "unknown tool \"nope\"\nsecond line"})
	// What the engine keeps of it and serves on replay.
	var se *session.SerializedError
	if !errors.As(recorded, &se) {
		t.Fatalf("RecordedError = %T", recorded)
	}
	served := &session.SerializedError{Name: se.Name, Message: se.Message}
	for _, tc := range []struct {
		name string
		err  error
		want *RPCError
	}{
		{"JSON-RPC error", served, &RPCError{Code: -32602, Message: "unknown tool \"nope\"\nsecond line"}},
		{"server gone, live", errors.Join(ErrServerUnavailable, errors.New("exited")), &RPCError{Code: CodeUnavailable, Message: "the MCP server is not available\nexited"}},
		{"server gone, recorded", &session.SerializedError{Name: "CallFailed", Message: ErrServerUnavailable.Error() + ": exit status 3"},
			&RPCError{Code: CodeUnavailable, Message: "CallFailed: the MCP server is not available: exit status 3"}},
		{"other", errors.New("boom"), &RPCError{Code: CodeInternalError, Message: "boom"}},
	} {
		_, got := AnswerOf(nil, tc.err)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if res, e := AnswerOf(json.RawMessage(`{"ok":true}`), nil); e != nil || string(res) != `{"ok":true}` {
		t.Errorf("AnswerOf(result) = %s, %v", res, e)
	}
}

func TestDriftAnswerNamesTheStepAndTheNearestCall(t *testing.T) {
	nearest := &session.Event{Step: 4, Kind: session.KindToolCall, Name: "w/tools/call", Args: json.RawMessage(`{"name":"add"}`)}
	d := &replay.DriftError{Step: 6, Kind: session.KindToolCall, Nearest: nearest, Code: replay.DriftNoRecordedCall,
		Diff: []string{"arguments.b: 3 → 4"}}
	_, got := AnswerOf(nil, d)
	if got.Code != CodeDrift || !strings.Contains(got.Message, "drift at step 6") ||
		!strings.Contains(got.Message, "nearest recorded call is w/tools/call at step 4 (differences: arguments.b: 3 → 4)") {
		t.Errorf("drift answer %+v", got)
	}
	var data DriftData
	if err := json.Unmarshal(got.Data, &data); err != nil {
		t.Fatal(err)
	}
	want := DriftData{Step: 6, Code: "NoRecordedCall", Nearest: &NearestCall{Step: 4, Name: "w/tools/call", Args: json.RawMessage(`{"name":"add"}`)},
		Differences: []string{"arguments.b: 3 → 4"}}
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("drift data (-want +got):\n%s", diff)
	}
	_, none := AnswerOf(nil, &replay.DriftError{Step: 9, Code: replay.DriftNoRecordedCall})
	if !strings.Contains(none.Message, "no unserved call of this kind left") {
		t.Errorf("a drift with nothing left to match says %q", none.Message)
	}
}
