package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
)

// accumulator assembles the chat.completion a stream of chat.completion.chunk data amounts to, over
// raw JSON so that members this codec does not model pass through untouched. It follows the SDK's
// ChatCompletionAccumulator (AddChunk), which is what an agent using the SDK ends up holding; see
// NormalizeStream for the rules.
type accumulator struct {
	env     *jsonobj.Object // the chunks' top-level members; "choices" is filled in by completion()
	choices map[int64]*choiceAcc
	stopped bool // [DONE] or an error event ended the stream
}

func newAccumulator() *accumulator {
	return &accumulator{env: jsonobj.New(), choices: map[int64]*choiceAcc{}}
}

// merge folds a member into o: a new member is added, an existing one is replaced by a value that is
// neither null nor "" (the API sends null for what a chunk does not update, and the SDK keeps a string
// it has over an empty one).
func merge(o *jsonobj.Object, key string, v json.RawMessage) {
	if _, ok := o.Get(key); !ok || (!jsonobj.IsNull(v) && string(v) != `""`) {
		o.Set(key, v)
	}
}

// placeholder adds key to o with value v unless it is there, fixing its position; the value is
// replaced when the member is finished.
func placeholder(o *jsonobj.Object, key string, v json.RawMessage) {
	if _, ok := o.Get(key); !ok {
		o.Set(key, v)
	}
}

// apply folds one event's data into the completion. The returned error names the field; the caller
// adds the operation and offset.
func (a *accumulator) apply(data json.RawMessage) *CodecError {
	if a.stopped {
		return nil // the SDK reads no further
	}
	chunk, err := jsonobj.Parse(data)
	if err != nil {
		// The SDK cannot decode such data into a chunk and fails the stream.
		return &CodecError{Codec: codecName, Err: fmt.Errorf("%w: the event's data is not a JSON object", ErrWrongType)}
	}
	if _, ok := chunk.Get("error"); ok {
		a.stopped = true // the SDK ends the stream with the error
		return nil
	}
	for _, k := range chunk.Keys {
		v := chunk.Vals[k]
		switch k {
		case "choices":
			placeholder(a.env, "choices", json.RawMessage("[]"))
			if err := a.applyChoices(v); err != nil {
				return err
			}
		case "id":
			if cur, ok := a.env.Get("id"); !ok || jsonobj.IsNull(cur) || string(cur) == `""` {
				a.env.Set("id", v)
			}
		case "object":
			if string(v) == `"chat.completion.chunk"` {
				v = jsonobj.Quote("chat.completion")
			}
			merge(a.env, k, v)
		case "obfuscation":
			// Random padding that differs from chunk to chunk; no completion has it.
		default:
			merge(a.env, k, v)
		}
	}
	return nil
}

func (a *accumulator) applyChoices(raw json.RawMessage) *CodecError {
	if jsonobj.IsNull(raw) {
		return nil
	}
	var items []json.RawMessage
	if jsonobj.Kind(raw) != '[' || json.Unmarshal(raw, &items) != nil {
		return &CodecError{Codec: codecName, Field: "choices", Err: ErrWrongType}
	}
	for i, item := range items {
		path := fmt.Sprintf("choices[%d]", i)
		choice, err := jsonobj.Parse(item)
		if err != nil {
			return &CodecError{Codec: codecName, Field: path, Err: ErrWrongType}
		}
		index, cerr := indexOf(choice, path)
		if cerr != nil {
			return cerr
		}
		if index < 0 {
			return &CodecError{Codec: codecName, Field: path + ".index", Err: ErrIndex}
		}
		c, ok := a.choices[index]
		if !ok {
			c = &choiceAcc{obj: jsonobj.New(), msg: newMessageAcc(), logprobs: newMerged(nil, true)}
			a.choices[index] = c
		}
		if err := c.apply(path, choice); err != nil {
			return err
		}
	}
	return nil
}

// indexOf reads the required integer index member of a choice or tool call delta.
func indexOf(o *jsonobj.Object, path string) (int64, *CodecError) {
	raw, ok := o.Get("index")
	if !ok {
		return 0, &CodecError{Codec: codecName, Field: path + ".index", Err: ErrMissing}
	}
	var n int64
	if jsonobj.Kind(raw) != '0' || json.Unmarshal(raw, &n) != nil {
		return 0, &CodecError{Codec: codecName, Field: path + ".index", Err: ErrWrongType}
	}
	return n, nil
}

// completion is the assembled chat.completion: the envelope with the choices in index order.
func (a *accumulator) completion() *jsonobj.Object {
	indexes := make([]int64, 0, len(a.choices))
	for i := range a.choices {
		indexes = append(indexes, i)
	}
	slices.Sort(indexes)
	choices := make([]json.RawMessage, len(indexes))
	for i, idx := range indexes {
		choices[i] = a.choices[idx].finish()
	}
	a.env.Set("choices", joinArray(choices))
	return a.env
}

// choiceAcc is a choice under construction. Its members keep the order they first arrived in, with
// the message where the first delta was.
type choiceAcc struct {
	obj      *jsonobj.Object
	msg      *messageAcc
	logprobs *merged // content and refusal token lists, appended
	hasMsg   bool
	hasLog   bool
}

func (c *choiceAcc) apply(path string, choice *jsonobj.Object) *CodecError {
	for _, k := range choice.Keys {
		v := choice.Vals[k]
		switch k {
		case "delta":
			placeholder(c.obj, "message", json.RawMessage("{}"))
			c.hasMsg = true
			if jsonobj.IsNull(v) {
				continue
			}
			delta, err := jsonobj.Parse(v)
			if err != nil {
				return &CodecError{Codec: codecName, Field: path + ".delta", Err: ErrWrongType}
			}
			if err := c.msg.apply(path+".delta", delta); err != nil {
				return err
			}
		case "logprobs":
			placeholder(c.obj, k, v)
			if jsonobj.IsNull(v) {
				continue
			}
			lp, err := jsonobj.Parse(v)
			if err != nil {
				return &CodecError{Codec: codecName, Field: path + ".logprobs", Err: ErrWrongType}
			}
			c.logprobs.apply(lp)
			c.hasLog = true
		default:
			merge(c.obj, k, v)
		}
	}
	return nil
}

func (c *choiceAcc) finish() json.RawMessage {
	if c.hasMsg {
		c.obj.Set("message", c.msg.finish())
	}
	if c.hasLog {
		c.obj.Set("logprobs", c.logprobs.finish())
	}
	return c.obj.Marshal()
}

// messageAcc is a choice's message under construction from its deltas.
type messageAcc struct {
	fields *merged // role, content and refusal (concatenated), and members this codec does not model
	// tools are the tool calls by index; toolsSeen says a tool_calls array arrived.
	tools     map[int64]*merged
	toolsSeen bool
	// nested are function_call (name and arguments concatenated) and audio (data and transcript
	// concatenated), as the SDK documents their deltas.
	nested map[string]*merged
}

func newMessageAcc() *messageAcc {
	return &messageAcc{
		fields: newMerged(func(k string) bool { return k == "content" || k == "refusal" }, false),
		tools:  map[int64]*merged{},
		nested: map[string]*merged{},
	}
}

func newNested(key string) *merged {
	if key == "audio" {
		return newMerged(func(k string) bool { return k == "data" || k == "transcript" }, false)
	}
	return newMerged(func(string) bool { return true }, false)
}

func (m *messageAcc) apply(path string, delta *jsonobj.Object) *CodecError {
	for _, k := range delta.Keys {
		v := delta.Vals[k]
		switch k {
		case "content", "refusal":
			if !jsonobj.IsNull(v) && jsonobj.Kind(v) != '"' {
				return &CodecError{Codec: codecName, Field: path + "." + k, Err: ErrWrongType}
			}
			m.fields.add(k, v)
		case "tool_calls":
			placeholder(m.fields.obj, k, v)
			if err := m.applyTools(path+".tool_calls", v); err != nil {
				return err
			}
		case "function_call", "audio":
			placeholder(m.fields.obj, k, v)
			if jsonobj.IsNull(v) {
				continue
			}
			o, err := jsonobj.Parse(v)
			if err != nil {
				return &CodecError{Codec: codecName, Field: path + "." + k, Err: ErrWrongType}
			}
			n, ok := m.nested[k]
			if !ok {
				n = newNested(k)
				m.nested[k] = n
			}
			n.apply(o)
		default:
			m.fields.add(k, v)
		}
	}
	return nil
}

func (m *messageAcc) applyTools(path string, raw json.RawMessage) *CodecError {
	if jsonobj.IsNull(raw) {
		return nil
	}
	var items []json.RawMessage
	if jsonobj.Kind(raw) != '[' || json.Unmarshal(raw, &items) != nil {
		return &CodecError{Codec: codecName, Field: path, Err: ErrWrongType}
	}
	m.toolsSeen = true
	for j, item := range items {
		tpath := fmt.Sprintf("%s[%d]", path, j)
		call, err := jsonobj.Parse(item)
		if err != nil {
			return &CodecError{Codec: codecName, Field: tpath, Err: ErrWrongType}
		}
		index, cerr := indexOf(call, tpath)
		if cerr != nil {
			return cerr
		}
		switch {
		case index == -1:
			index = 0 // as the SDK does, for providers that number a single tool call -1
		case index < 0:
			return &CodecError{Codec: codecName, Field: tpath + ".index", Err: ErrIndex}
		}
		t, ok := m.tools[index]
		if !ok {
			t = newMerged(func(string) bool { return false }, false)
			t.objects = map[string]*merged{}
			m.tools[index] = t
		}
		call.Del("index")
		if err := t.applyCall(tpath, call); err != nil {
			return err
		}
	}
	return nil
}

func (m *messageAcc) finish() json.RawMessage {
	for k, n := range m.nested {
		m.fields.obj.Set(k, n.finish())
	}
	if m.toolsSeen {
		indexes := make([]int64, 0, len(m.tools))
		for i := range m.tools {
			indexes = append(indexes, i)
		}
		slices.Sort(indexes)
		calls := make([]json.RawMessage, len(indexes))
		for i, idx := range indexes {
			calls[i] = m.tools[idx].finish()
		}
		m.fields.obj.Set("tool_calls", joinArray(calls))
	}
	return m.fields.finish()
}

// merged is an object assembled from deltas: members keep the order they first arrived in, strings
// the appends rule names are concatenated, arrays are concatenated when arrays is set, and every
// other member is merged (see merge).
type merged struct {
	obj     *jsonobj.Object
	appends func(key string) bool
	arrays  bool
	strs    map[string]*pieces
	arrs    map[string][]json.RawMessage
	// objects are a tool call's object members (function, custom), each assembled with its strings
	// concatenated, as the SDK assembles function.name and function.arguments.
	objects map[string]*merged
}

func newMerged(appends func(string) bool, arrays bool) *merged {
	if appends == nil {
		appends = func(string) bool { return false }
	}
	return &merged{obj: jsonobj.New(), appends: appends, arrays: arrays,
		strs: map[string]*pieces{}, arrs: map[string][]json.RawMessage{}}
}

func (m *merged) apply(o *jsonobj.Object) {
	for _, k := range o.Keys {
		m.add(k, o.Vals[k])
	}
}

func (m *merged) add(k string, v json.RawMessage) {
	switch {
	case jsonobj.Kind(v) == '"' && m.appends(k):
		placeholder(m.obj, k, v)
		p, ok := m.strs[k]
		if !ok {
			p = &pieces{}
			m.strs[k] = p
		}
		p.add(v)
	case jsonobj.Kind(v) == '[' && m.arrays:
		placeholder(m.obj, k, v)
		var items []json.RawMessage
		_ = json.Unmarshal(v, &items)
		m.arrs[k] = append(m.arrs[k], items...)
		if m.arrs[k] == nil {
			m.arrs[k] = []json.RawMessage{}
		}
	default:
		merge(m.obj, k, v)
	}
}

// applyCall folds a tool call delta (without its index) into a tool call.
func (m *merged) applyCall(path string, call *jsonobj.Object) *CodecError {
	for _, k := range call.Keys {
		v := call.Vals[k]
		n, isObj := m.objects[k]
		switch {
		case jsonobj.Kind(v) == '{':
			o, _ := jsonobj.Parse(v)
			if !isObj {
				n = newMerged(func(string) bool { return true }, false)
				m.objects[k] = n
			}
			placeholder(m.obj, k, v)
			n.apply(o)
		case isObj && !jsonobj.IsNull(v):
			return &CodecError{Codec: codecName, Field: path + "." + k, Err: ErrWrongType}
		default:
			merge(m.obj, k, v)
		}
	}
	return nil
}

func (m *merged) finish() json.RawMessage {
	for k, p := range m.strs {
		m.obj.Set(k, p.value())
	}
	for k, items := range m.arrs {
		m.obj.Set(k, joinArray(items))
	}
	for k, n := range m.objects {
		m.obj.Set(k, n.finish())
	}
	return m.obj.Marshal()
}

// pieces is a string streamed in pieces. A string that came whole keeps the bytes it came in, so a
// stream that carries each string in one piece (SynthesizeStream's) assembles to exactly the
// response it was written from.
type pieces struct {
	buf   bytes.Buffer
	first json.RawMessage
	n     int
}

func (p *pieces) add(raw json.RawMessage) {
	var s string
	_ = json.Unmarshal(raw, &s)
	if p.n == 0 {
		p.first = raw
	}
	p.n++
	p.buf.WriteString(s)
}

func (p *pieces) value() json.RawMessage {
	if p.n == 1 {
		return p.first
	}
	return jsonobj.Quote(p.buf.String())
}
