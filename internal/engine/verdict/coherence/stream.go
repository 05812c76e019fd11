package coherence

import (
	"encoding/json"
	"slices"
	"strings"
)

// Plan is the declared plan with the run's own marks.
type Plan struct {
	Task  string `json:"task,omitempty"`
	Steps []Step `json:"steps"`
}

// Step is one declared step. Done is the run's own assertion (it marked the step), never evidence.
type Step struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	Done bool   `json:"done"`
	// Tools name the tools whose successful answer is the step's evidence, for a step whose work is
	// neither a file nor a command.
	Tools []string `json:"tools,omitempty"`
}

// outstanding are the steps not marked done.
func (p Plan) outstanding() []Step {
	var out []Step
	for _, s := range p.Steps {
		if !s.Done {
			out = append(out, s)
		}
	}
	return out
}

// Call is one recorded tool call.
type Call struct {
	Name   string          `json:"name"`
	Args   json.RawMessage `json:"args,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	// Failed is true when the recorder saw the call return an error.
	Failed bool `json:"failed,omitempty"`
	// Step is the call's step in the session log.
	Step int64 `json:"step,omitempty"`
}

// Round is one turn of the run: the tool calls executed in it and the steps it marked done.
type Round struct {
	// Label is the round's number as a human counts it.
	Label int    `json:"label"`
	Calls []Call `json:"calls,omitempty"`
	// Marks are the step ids the run marked done in this round (STEP_CLAIMED records).
	Marks []string `json:"marks,omitempty"`
}

// call is a flattened tool call with everything the judgements read, every field defaulted.
type call struct {
	round    int // index into the rounds
	label    int
	step     int64
	name     string
	args     map[string]any
	result   map[string]any
	ok       bool
	mutated  bool
	paths    []string
	isRun    bool
	isOrient bool
}

// flatten turns rounds into one ordered call stream. A call whose name is empty is skipped, and args or
// results that are not JSON objects read as empty: a provider can emit arguments that do not parse,
// and a judgement that fails on them is worse than none.
func flatten(rounds []Round) []call {
	var out []call
	for i, r := range rounds {
		for _, c := range r.Calls {
			if c.Name == "" {
				continue
			}
			out = append(out, flattenCall(i, r.Label, c))
		}
	}
	return out
}

func flattenCall(round, label int, c Call) call {
	fc := call{round: round, label: label, step: c.Step, name: c.Name, args: object(c.Args), result: object(c.Result),
		isRun: RunTools[c.Name], isOrient: OrientTools[c.Name]}
	// A call is ok when the recorder saw no error and the tool did not itself report ok:false.
	fc.ok = !c.Failed && fc.result["ok"] != false
	fc.paths = changedPaths(fc.args, fc.result)
	if m, present := fc.result["mutated"].(bool); present {
		fc.mutated = m
	} else {
		fc.mutated = fc.ok && WriteTools[c.Name]
	}
	return fc
}

func object(raw json.RawMessage) map[string]any {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return map[string]any{}
	}
	return m
}

// pathKeys are the argument and result fields that name a single changed path.
var pathKeys = []string{"path", "file", "file_path", "filename", "to", "destination", "new_path"}

// listKeys are the fields that name several: strings, or objects with one of pathKeys.
var listKeys = []string{"paths", "files", "edits", "changed", "written"}

// changedPaths is the one place a tool call's changed paths are spelled out, normalised and without
// duplicates, so no judgement invents its own reading of a call.
func changedPaths(args, result map[string]any) []string {
	var out []string
	add := func(v any) {
		if s, ok := v.(string); ok {
			if p := NormPath(s); p != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	for _, m := range []map[string]any{args, result} {
		for _, k := range pathKeys {
			add(m[k])
		}
		for _, k := range listKeys {
			list, _ := m[k].([]any)
			for _, item := range list {
				add(item)
				if obj, ok := item.(map[string]any); ok {
					for _, pk := range pathKeys {
						add(obj[pk])
					}
				}
			}
		}
	}
	return out
}

// commandOf is the command line behind a run call, whatever tool produced it.
func commandOf(c call) string {
	for _, m := range []map[string]any{c.result, c.args} {
		if s, ok := m["command"].(string); ok {
			return s
		}
	}
	for _, m := range []map[string]any{c.result, c.args} {
		if argv, ok := m["argv"].([]any); ok {
			parts := make([]string, 0, len(argv))
			for _, a := range argv {
				if s, ok := a.(string); ok {
					parts = append(parts, s)
				}
			}
			return strings.Join(parts, " ")
		}
	}
	return ""
}

// runFailed reads a run's result. ok only means the command ran, not that it passed: a timeout,
// passed:false or a non-zero exit code is a failure.
func runFailed(result map[string]any) bool {
	if result["timedOut"] == true || result["passed"] == false {
		return true
	}
	code, ok := result["exitCode"].(float64)
	return ok && code != 0
}
