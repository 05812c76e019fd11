package fakellm_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentrewind/agentrewind/internal/fakellm"
)

// functionCalls are the function calls of a response, name and arguments.
func functionCalls(t *testing.T, r *responses.Response) []callView {
	t.Helper()
	var out []callView
	for _, item := range r.Output {
		if item.Type != "function_call" {
			continue
		}
		fc := item.AsFunctionCall()
		v := callView{ID: fc.CallID, Type: string(fc.Type), Name: fc.Name}
		if err := json.Unmarshal([]byte(fc.Arguments), &v.Args); err != nil {
			t.Fatalf("arguments %q are not a JSON object: %v", fc.Arguments, err)
		}
		out = append(out, v)
	}
	return out
}

// outputOf is the response's output handed back as input items, the way an agent continues a
// conversation without previous_response_id.
func outputOf(r *responses.Response) []responses.ResponseInputItemUnionParam {
	var items []responses.ResponseInputItemUnionParam
	for _, item := range r.Output {
		switch item.Type {
		case "message":
			m := item.AsMessage().ToParam()
			items = append(items, responses.ResponseInputItemUnionParam{OfOutputMessage: &m})
		case "function_call":
			fc := item.AsFunctionCall().ToParam()
			items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCall: &fc})
		}
	}
	return items
}

func toolOutput(callID, output string) responses.ResponseInputItemUnionParam {
	out := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	out.OfFunctionCallOutput.CallID = openai.String(callID)
	return out
}

// TestResponsesAnswerTheScriptJSONAndStreamedAndFollowChains drives the agent script through the
// Responses API: step 1 as JSON and streamed (the same response), step 2 once by handing the output
// back as items and once through previous_response_id (the same turn), and the system prompt's fix
// through instructions.
func TestResponsesAnswerTheScriptJSONAndStreamedAndFollowChains(t *testing.T) {
	fake, url := start(t, agentScript(t))
	client := openaiClient(url)
	step1 := responses.ResponseNewParams{Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Make the failing test pass.")}}
	first, err := client.Responses.New(t.Context(), step1)
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != "completed" || first.OutputText() != "Let me look at the code first." || !strings.HasPrefix(first.ID, "resp_") {
		t.Fatalf("step 1 answered %s", first.RawJSON())
	}
	read := functionCalls(t, first)
	if len(read) != 1 || read[0].Name != "read_file" || read[0].Args["path"] != "main.go" {
		t.Fatalf("step 1 calls %+v", read)
	}
	if first.Usage.OutputTokens == 0 || first.Usage.TotalTokens != first.Usage.InputTokens+first.Usage.OutputTokens {
		t.Fatalf("usage %+v", first.Usage)
	}

	stream := client.Responses.NewStreaming(t.Context(), step1)
	var types []string
	var text strings.Builder
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if types[0] != "response.created" || types[len(types)-1] != "response.completed" || text.String() != first.OutputText() {
		t.Fatalf("the stream's events %v assemble %q", types, text.String())
	}
	if final.ID != first.ID || cmp.Diff(read, functionCalls(t, &final)) != "" {
		t.Fatalf("the streamed response %s differs from the JSON one %s", final.ID, first.ID)
	}

	byItems := responses.ResponseNewParams{Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{
		OfInputItemList: append(append(responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Make the failing test pass.", responses.EasyInputMessageRoleUser)},
			outputOf(first)...), toolOutput(read[0].ID, "package main\n"))}}
	byChain := responses.ResponseNewParams{Model: "gpt-test", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{toolOutput(read[0].ID, "package main\n")}}}
	for name, params := range map[string]responses.ResponseNewParams{"items": byItems, "chain": byChain} {
		second, err := client.Responses.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		if got := functionCalls(t, second); len(got) != 1 || got[0].Name != "delete_file" {
			t.Fatalf("%s: step 2 calls %+v, want the flawed delete_file", name, got)
		}
		params.Instructions = openai.String("You never delete tests.")
		fixed, err := client.Responses.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		if got := functionCalls(t, fixed); len(got) != 1 || got[0].Name != "write_file" {
			t.Fatalf("%s: step 2 with the fix calls %+v, want write_file", name, got)
		}
	}
	if n := fake.RequestsTo(fakellm.OpenAIResponses); n != 6 {
		t.Fatalf("RequestsTo(responses) = %d, want 6", n)
	}
}

// TestResponsesRefuseAChainTheServerNeverAnswered is what a live provider says to a fork that sends
// a recorded response's id as it is.
func TestResponsesRefuseAChainTheServerNeverAnswered(t *testing.T) {
	_, url := start(t, agentScript(t))
	status, _, body := post(t, url, "/v1/responses", `{"model":"m","previous_response_id":"resp_recorded","input":"hi"}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "Previous response with id 'resp_recorded' not found.") {
		t.Fatalf("%d %s", status, body)
	}
	status, _, body = post(t, url, "/v1/responses", `{"input":"hi"}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "'model'") {
		t.Fatalf("%d %s", status, body)
	}
}
