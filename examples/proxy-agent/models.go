package main

import (
	"context"
	"encoding/json"
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// toolCall is a tool call the model asked for, whatever API it came through.
type toolCall struct {
	id, name string
	input    json.RawMessage
}

// conversation is the triage conversation on one model API: the system prompt, the issue and the two
// tools, then each answer and tool result in turn.
type conversation interface {
	// next asks the model and returns the text and tool calls of its answer, and whether the model
	// ended its turn (its tool calls are still run).
	next(ctx context.Context) (text string, calls []toolCall, ended bool, err error)
	// answer adds the results of the answer's tool calls, in order.
	answer(calls []toolCall, results []string)
}

// newConversation starts the conversation on cfg's API, its SDK pointed at cfg.baseURL.
func newConversation(cfg config) conversation {
	switch cfg.api {
	case APIOpenAI:
		return newChatConversation(cfg)
	case APIOpenAIResponses:
		return newResponsesConversation(cfg)
	}
	return newMessagesConversation(cfg)
}

// toolSchema is the input schema of a tool taking one string argument.
func toolSchema(arg string) map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{arg: map[string]string{"type": "string"}}, "required": []string{arg}}
}

// The tools, by name, with their one argument.
var tools = [][2]string{{"search_issues", "query"}, {"add_label", "label"}}

// messagesConversation is the Anthropic Messages API.
type messagesConversation struct {
	client sdk.Client
	params sdk.MessageNewParams
}

func newMessagesConversation(cfg config) *messagesConversation {
	opts := []option.RequestOption{option.WithBaseURL(cfg.baseURL)}
	switch {
	case cfg.apiKey != "":
		opts = append(opts, option.WithAPIKey(cfg.apiKey))
	case cfg.authToken != "":
		opts = append(opts, option.WithAuthToken(cfg.authToken))
	default:
		opts = append(opts, option.WithAPIKey("placeholder")) // the proxy holds the real key
	}
	c := &messagesConversation{client: sdk.NewClient(opts...), params: sdk.MessageNewParams{Model: sdk.Model(cfg.model), MaxTokens: 1024,
		System:   []sdk.TextBlockParam{{Text: SystemPrompt}},
		Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(Issue))}}}
	for _, t := range tools {
		c.params.Tools = append(c.params.Tools, sdk.ToolUnionParamOfTool(sdk.ToolInputSchemaParam{
			Properties: map[string]any{t[1]: map[string]string{"type": "string"}}, Required: []string{t[1]}}, t[0]))
	}
	return c
}

func (c *messagesConversation) next(ctx context.Context) (string, []toolCall, bool, error) {
	msg, err := c.client.Messages.New(ctx, c.params)
	if err != nil {
		return "", nil, false, err
	}
	c.params.Messages = append(c.params.Messages, msg.ToParam())
	var text string
	var calls []toolCall
	for _, block := range msg.Content {
		switch block.Type {
		case "text":
			text = block.Text
		case "tool_use":
			calls = append(calls, toolCall{id: block.ID, name: block.Name, input: block.Input})
		}
	}
	return text, calls, msg.StopReason != sdk.StopReasonToolUse, nil
}

func (c *messagesConversation) answer(calls []toolCall, results []string) {
	blocks := make([]sdk.ContentBlockParamUnion, len(calls))
	for i, call := range calls {
		blocks[i] = sdk.NewToolResultBlock(call.id, results[i], false)
	}
	c.params.Messages = append(c.params.Messages, sdk.NewUserMessage(blocks...))
}

// openaiClient is the OpenAI SDK pointed at the proxy, with a placeholder key unless one is given.
func openaiClient(cfg config) openai.Client {
	key := cfg.apiKey
	if key == "" {
		key = "placeholder" // the proxy holds the real key
	}
	return openai.NewClient(openaioption.WithBaseURL(cfg.baseURL), openaioption.WithAPIKey(key))
}

// chatConversation is OpenAI's Chat Completions API.
type chatConversation struct {
	client openai.Client
	params openai.ChatCompletionNewParams
}

func newChatConversation(cfg config) *chatConversation {
	c := &chatConversation{client: openaiClient(cfg), params: openai.ChatCompletionNewParams{Model: cfg.model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(SystemPrompt), openai.UserMessage(Issue)}}}
	for _, t := range tools {
		c.params.Tools = append(c.params.Tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t[0], Parameters: shared.FunctionParameters(toolSchema(t[1]))}))
	}
	return c
}

func (c *chatConversation) next(ctx context.Context) (string, []toolCall, bool, error) {
	resp, err := c.client.Chat.Completions.New(ctx, c.params)
	if err != nil {
		return "", nil, false, err
	}
	if len(resp.Choices) == 0 {
		return "", nil, false, fmt.Errorf("the completion %s has no choice", resp.ID)
	}
	msg := resp.Choices[0].Message
	c.params.Messages = append(c.params.Messages, msg.ToParam())
	var calls []toolCall
	for _, tc := range msg.ToolCalls {
		calls = append(calls, toolCall{id: tc.ID, name: tc.Function.Name, input: json.RawMessage(tc.Function.Arguments)})
	}
	return msg.Content, calls, resp.Choices[0].FinishReason != "tool_calls", nil
}

func (c *chatConversation) answer(calls []toolCall, results []string) {
	for i, call := range calls {
		c.params.Messages = append(c.params.Messages, openai.ToolMessage(results[i], call.id))
	}
}

// responsesConversation is OpenAI's Responses API, each turn handing the conversation back as input
// items (no previous_response_id: the run holds its own history, as a stateless agent does).
type responsesConversation struct {
	client openai.Client
	params responses.ResponseNewParams
	input  responses.ResponseInputParam
}

func newResponsesConversation(cfg config) *responsesConversation {
	c := &responsesConversation{client: openaiClient(cfg), params: responses.ResponseNewParams{Model: cfg.model,
		Instructions: openai.String(SystemPrompt)},
		input: responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(Issue, responses.EasyInputMessageRoleUser)}}
	for _, t := range tools {
		c.params.Tools = append(c.params.Tools, responses.ToolParamOfFunction(t[0], toolSchema(t[1]), false))
	}
	return c
}

func (c *responsesConversation) next(ctx context.Context) (string, []toolCall, bool, error) {
	c.params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: c.input}
	resp, err := c.client.Responses.New(ctx, c.params)
	if err != nil {
		return "", nil, false, err
	}
	var calls []toolCall
	for _, item := range resp.Output {
		switch item.Type {
		case "message":
			m := item.AsMessage().ToParam()
			c.input = append(c.input, responses.ResponseInputItemUnionParam{OfOutputMessage: &m})
		case "function_call":
			fc := item.AsFunctionCall()
			p := fc.ToParam()
			c.input = append(c.input, responses.ResponseInputItemUnionParam{OfFunctionCall: &p})
			calls = append(calls, toolCall{id: fc.CallID, name: fc.Name, input: json.RawMessage(fc.Arguments)})
		}
	}
	return resp.OutputText(), calls, len(calls) == 0, nil
}

func (c *responsesConversation) answer(calls []toolCall, results []string) {
	for i, call := range calls {
		out := responses.ResponseInputItemParamOfFunctionCallOutput(results[i])
		out.OfFunctionCallOutput.CallID = openai.String(call.id)
		c.input = append(c.input, out)
	}
}
