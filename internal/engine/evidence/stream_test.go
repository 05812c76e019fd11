package evidence

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/engine/verdict"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/convergence"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/ledger"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/resume"
	"github.com/agentrewind/agentrewind/internal/engine/verdict/rewind"
)

func model(msgs ...string) session.Event {
	req := &session.Request{Model: "m", System: "sys"}
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		req.Messages = append(req.Messages, session.Message{Role: "user", Content: b})
	}
	return session.Event{Kind: session.KindModelCall, Request: req, Author: session.AuthorThirdParty}
}

func tool(name string, args, result any) session.Event {
	a, _ := json.Marshal(args)
	r, _ := json.Marshal(result)
	return session.Event{Kind: session.KindToolCall, Name: name, Args: a, Result: r, Author: session.AuthorThirdParty}
}

func led(author session.Author, r ledger.Record) session.Event {
	return session.Event{Kind: session.KindLedger, Author: author, Ledger: r.JSON()}
}

func TestTurnDigestIsCanonicalAndSeesEveryEarlierMessage(t *testing.T) {
	a := &session.Request{System: "s", Messages: []session.Message{{Role: "user", Content: json.RawMessage(`{"b":1, "a":2}`)}}}
	b := &session.Request{System: "s", Model: "other", Messages: []session.Message{{Role: "user", Content: json.RawMessage(`{"a":2,"b":1}`)}}}
	if TurnDigest(a) != TurnDigest(b) || TurnDigest(a) == "" {
		t.Fatal("key order, whitespace and the model name must not change a turn's digest")
	}
	c := &session.Request{System: "s", Messages: []session.Message{{Role: "user", Content: json.RawMessage(`{"a":3,"b":1}`)}}}
	if TurnDigest(a) == TurnDigest(c) {
		t.Fatal("rewriting a message must change the digest")
	}
	if TurnDigest(nil) != "" {
		t.Fatal("a missing request is no anchor")
	}
	broken := &session.Request{Messages: []session.Message{{Role: "user", Content: json.RawMessage(`{"a":1,"a":2}`)}}}
	if TurnDigest(broken) != "" {
		t.Fatal("a request that cannot be canonicalised is no anchor")
	}
}

func TestTurnDigestIsTheHashOfTheCanonicalConversation(t *testing.T) {
	// Checkpoints already recorded carry digests of this exact text: it must not drift.
	req := &session.Request{Model: "m", System: "sys", Messages: []session.Message{
		{Role: "user", Content: json.RawMessage(`"hi <b>"`)},
		{Role: "assistant", Content: json.RawMessage(`[{"type":"text","text":"ok","n":1.50}]`)},
	}}
	want := rewind.DigestTurn([]byte(`{"messages":[{"content":"hi <b>","role":"user"},` +
		`{"content":[{"n":1.5,"text":"ok","type":"text"}],"role":"assistant"}],"system":"sys"}`))
	if got := TurnDigest(req); got != want {
		t.Errorf("TurnDigest = %s, want %s", got, want)
	}
	if got, want := TurnDigest(&session.Request{}), rewind.DigestTurn([]byte(`{"messages":null,"system":""}`)); got != want {
		t.Errorf("TurnDigest of an empty request = %s, want %s", got, want)
	}
}

func TestTurnDigestSeesAnEditedLargeInteger(t *testing.T) {
	turn := func(id, n string) *session.Request {
		content := `[{"type":"tool_use","id":` + id + `,"name":"lookup","input":{"account":` + n + `}}]`
		return &session.Request{System: "s", Messages: []session.Message{{Role: "assistant", Content: json.RawMessage(content)}}}
	}
	digests := map[string]string{}
	for _, c := range []struct{ id, n string }{
		{"1234567890123456789", "9007199254740993"},
		{"1234567890123456788", "9007199254740993"}, // the id edited by one
		{"1234567890123456789", "9007199254740992"}, // the argument edited by one
		{"1234567890123456789", "1.0000000000000001"},
		{"1234567890123456789", "1"},
		{"1234567890123456789", "1e-400"},
		{"1234567890123456789", "0"},
	} {
		d := TurnDigest(turn(c.id, c.n))
		if d == "" {
			t.Fatalf("id %s, n %s: no digest", c.id, c.n)
		}
		if prev, ok := digests[d]; ok {
			t.Errorf("id %s, n %s digests like %s", c.id, c.n, prev)
		}
		digests[d] = c.id + "/" + c.n
	}
	if TurnDigest(turn("1234567890123456789", "1.0")) != TurnDigest(turn("1234567890123456789", "1")) {
		t.Error("1.0 and 1 are one number")
	}
}

func TestTurnDigestRefusesTextThatIsNotUnicode(t *testing.T) {
	msg := func(role, content string) []session.Message {
		return []session.Message{{Role: role, Content: json.RawMessage(content)}}
	}
	repaired := TurnDigest(&session.Request{System: "s\ufffd", Messages: msg("user", `"x\ufffd"`)})
	if repaired == "" {
		t.Fatal("U+FFFD is valid text and must have a digest")
	}
	for name, req := range map[string]*session.Request{
		"invalid UTF-8 in a message":     {System: "s", Messages: msg("user", "\"x\xff\"")},
		"lone surrogate in a message":    {System: "s", Messages: msg("user", `"x\ud800"`)},
		"invalid UTF-8 in the system":    {System: "s\xff", Messages: msg("user", `"x"`)},
		"invalid UTF-8 in the role":      {System: "s", Messages: msg("user\xff", `"x"`)},
		"invalid UTF-8 in a tool_use id": {System: "s", Messages: msg("assistant", "[{\"type\":\"tool_use\",\"id\":\"t\xff\"}]")},
	} {
		if d := TurnDigest(req); d != "" {
			t.Errorf("%s: digest %s, want none (repaired text digests as %s)", name, d, repaired)
		}
	}
}

func TestTurnsNumberEveryModelCall(t *testing.T) {
	events := []session.Event{model("a"), tool("read_file", nil, nil), model("a", "b")}
	turns := Turns(events)
	if len(turns) != 2 || turns[0].Index != 0 || turns[1].Index != 1 || turns[1].Digest != TurnDigest(events[2].Request) {
		t.Fatalf("turns = %+v", turns)
	}
}

func TestRoundsGroupToolCallsAndMarksByTurn(t *testing.T) {
	events := []session.Event{
		tool("list_dir", map[string]any{"path": "."}, nil),
		model("go"),
		tool("write_file", map[string]any{"path": "a.go"}, map[string]any{"ok": true}),
		led(session.AuthorAgent, ledger.Claimed("s1", "")),
		led(session.AuthorAgent, ledger.Intent("r", "g", "")),
		model("next"),
		{Kind: session.KindToolCall, Name: "run_command", Error: &session.SerializedError{Name: "Err", Message: "boom"}},
		led(session.AuthorAgent, ledger.Verified("s1", "abc1234", "file-path")),
		{Kind: session.KindLedger, Ledger: json.RawMessage(`garbage`)},
	}
	rounds := Rounds(events)
	if len(rounds) != 3 {
		t.Fatalf("rounds = %+v", rounds)
	}
	if rounds[0].Label != 1 || len(rounds[0].Calls) != 1 || rounds[1].Label != 2 || len(rounds[1].Calls) != 1 {
		t.Fatalf("rounds = %+v", rounds)
	}
	if !reflect.DeepEqual(rounds[1].Marks, []string{"s1"}) || !reflect.DeepEqual(rounds[2].Marks, []string{"s1"}) {
		t.Fatalf("marks = %v %v", rounds[1].Marks, rounds[2].Marks)
	}
	if !rounds[2].Calls[0].Failed {
		t.Fatal("a recorded error marks the call failed")
	}
}

func TestEnvErrorTakesTheLatestToolErrorWithItsRecordedAuthor(t *testing.T) {
	cases := []struct {
		name   string
		events []session.Event
		text   string
		author session.Author
	}{
		{"no error is no excerpt", []session.Event{tool("read_file", nil, map[string]any{"ok": true})}, "", ""},
		{"a recorded tool error", []session.Event{
			{Kind: session.KindToolCall, Author: session.AuthorThirdParty, Error: &session.SerializedError{Name: "KeyError", Message: "'id'"}},
			tool("read_file", nil, nil),
		}, "KeyError: 'id'", session.AuthorThirdParty},
		{"the stderr of a run that exited non-zero", []session.Event{
			tool("run_command", map[string]any{"command": "go test"}, map[string]any{"exitCode": 1, "stderr": "FAIL x", "output": "o"}),
		}, "FAIL x", session.AuthorThirdParty},
		{"the output when there is no stderr", []session.Event{
			tool("run_command", nil, map[string]any{"exitCode": 2, "output": "panic"}),
		}, "panic", session.AuthorThirdParty},
		{"a run that passed is no error", []session.Event{tool("run_command", nil, map[string]any{"exitCode": 0, "stderr": "warn"})}, "", ""},
		{"the latest error wins", []session.Event{
			tool("run_command", nil, map[string]any{"exitCode": 1, "stderr": "old"}),
			tool("run_command", nil, map[string]any{"exitCode": 1, "stderr": "new"}),
		}, "new", session.AuthorThirdParty},
		{"a note the agent wrote is never an env error", []session.Event{
			{Kind: session.KindNote, Author: session.AuthorAgent, Text: "Traceback: trust me"},
		}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ex := EnvError(tc.events)
			if ex.Text() != tc.text || ex.Author() != tc.author {
				t.Fatalf("excerpt = %q by %q", ex.Text(), ex.Author())
			}
		})
	}
}

// TestGatherWithoutAWorkspaceStandsOnTheRecordersRung gathers a run recorded without a workspace: the
// write the recorder saw verifies s1, while s2, which the agent only recorded as verified, stays in the
// residual. The residual history stands on the recorder too: s1 leaves it in the turn it was written.
func TestGatherWithoutAWorkspaceStandsOnTheRecordersRung(t *testing.T) {
	s := &session.Session{Meta: session.Meta{ID: "sess-1"}, Events: []session.Event{
		model("go"),
		led(session.AuthorAgent, ledger.Intent("", "g", "abcdef1", ledger.Step{ID: "s1", Text: "write a.go"}, ledger.Step{ID: "s2", Text: "write b.go"})),
		tool("write_file", map[string]any{"path": "a.go"}, nil),
		led(session.AuthorAgent, ledger.Verified("s1", "abcdef1234", "file-path")),
		led(session.AuthorAgent, ledger.Verified("s2", "abcdef1234", "file-path")),
		model("more"),
	}}
	g, err := Gather(s, nil, verdict.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if g.Git != nil || g.Facts.Ledger.RunID != "sess-1" || !g.Facts.Ancestry.NoWorkspace {
		t.Fatalf("gathered = %+v", g)
	}
	if len(g.Facts.Ancestry.VerifiedAtRead) != 0 || len(g.Facts.Turns) != 2 || len(g.Facts.Rounds) != 2 {
		t.Fatalf("facts = %+v", g.Facts)
	}
	if want := []convergence.Snapshot{{Turn: 0, Residual: []string{"s1", "s2"}}, {Turn: 1, Residual: []string{"s2"}}}; !reflect.DeepEqual(g.Facts.History, want) {
		t.Fatalf("history = %+v, want %+v: s1 witnessed by the recorder, s2 not", g.Facts.History, want)
	}
	r := verdict.Evaluate(g.Facts, verdict.DefaultPolicy())
	if r.Resume.Verdict != resume.Resumable || r.Resume.ResumeSHA != "" {
		t.Fatalf("resume = %+v", r.Resume)
	}
	if len(r.Resume.Verified) != 1 || r.Resume.Verified[0].Rung != resume.RungRecorder || len(r.Resume.Residual) != 1 || r.Resume.Residual[0] != "s2" {
		t.Fatalf("verified %+v residual %v, want s1 on the recorder's rung and s2 left", r.Resume.Verified, r.Resume.Residual)
	}
	if r.Convergence.Verdict != convergence.Insufficient || r.Rewind.Decision != rewind.NoRewind {
		t.Fatalf("two turns are too few to call: convergence %s, rewind %s", r.Convergence.Verdict, r.Rewind.Decision)
	}
}

func TestGatherAgainstAWorkspace(t *testing.T) {
	f := newFixture(t)
	start := f.commit("init", map[string]string{"README.md": "x"})
	s1 := f.commit("s1", map[string]string{"a.go": "package a"})
	s := &session.Session{Meta: session.Meta{ID: "sess-2"}, Events: []session.Event{
		model("go"),
		led(session.AuthorAgent, ledger.Intent("run-2", "g", start, ledger.Step{ID: "s1", Text: "write a.go"})),
		led(session.AuthorAgent, ledger.Verified("s1", s1[:8], "file-path")),
	}}
	g, err := Gather(s, f.open(""), verdict.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if g.Git == nil || len(g.Git.Steps) != 1 || !g.Git.Steps[0].Verified || g.Facts.Ledger.RunID != "run-2" {
		t.Fatalf("gathered = %+v", g.Git)
	}
	r := verdict.Evaluate(g.Facts, verdict.DefaultPolicy())
	if r.Resume.Verdict != resume.Complete || r.Reachability.Reachability != resume.Collectible {
		t.Fatalf("report = %+v", r.Resume)
	}
}

// TestARewindAnchorCanFail judges a recorder-minted stamp of turn 1 against what the agent sent
// afterwards: the live digest comes from the latest transcript holding the turn, so an edit under it
// after SUSPEND leaves the rewind UNANCHORED.
func TestARewindAnchorCanFail(t *testing.T) {
	onLane := func(ev session.Event, lane string) session.Event { ev.Lane = lane; return ev }
	system := func(ev session.Event, s string) session.Event { ev.Request.System = s; return ev }
	turn0, turn1 := model("fix the bug"), model("fix the bug", "tests fail at a.go:3")
	stamp := func(author session.Author, turn int, of session.Event) session.Event {
		return led(author, ledger.Suspend(turn, TurnDigest(of.Request), ""))
	}
	cases := []struct {
		name   string
		events []session.Event
		want   rewind.Decision
		reason rewind.Reason
	}{
		{"an untouched history rewinds", []session.Event{turn0, turn1, stamp(session.AuthorRecorder, 1, turn1),
			model("fix the bug", "tests fail at a.go:3", "try again")}, rewind.Rewind, rewind.ReasonAnchoredRewind},
		{"a message under the turn edited after SUSPEND is unanchored", []session.Event{turn0, turn1, stamp(session.AuthorRecorder, 1, turn1),
			model("fix the bug", "tests pass", "try again")}, rewind.Unanchored, rewind.ReasonDigestMismatch},
		{"a system prompt changed after SUSPEND is unanchored", []session.Event{turn0, turn1, stamp(session.AuthorRecorder, 1, turn1),
			system(model("fix the bug", "tests fail at a.go:3", "try again"), "be brief")}, rewind.Unanchored, rewind.ReasonDigestMismatch},
		{"a turn index past the transcript is unanchored", []session.Event{turn0, turn1, stamp(session.AuthorRecorder, 5, turn1)},
			rewind.Unanchored, rewind.ReasonNoLiveTurn},
		{"two stamps of one turn that disagree are no anchor", []session.Event{turn0, turn1, stamp(session.AuthorRecorder, 1, turn1),
			stamp(session.AuthorRecorder, 1, turn0)}, rewind.Unanchored, rewind.ReasonNoCheckpoint},
		{"an agent-authored stamp is no anchor", []session.Event{turn0, turn1, stamp(session.AuthorAgent, 1, turn1)},
			rewind.Unanchored, rewind.ReasonNoCheckpoint},
		{"an edit on another lane's transcript does not touch this turn", []session.Event{turn0, turn1, stamp(session.AuthorRecorder, 1, turn1),
			onLane(model("other work", "other result", "more"), "0.1")}, rewind.Rewind, rewind.ReasonAnchoredRewind},
		{"a later, shorter (compacted) transcript leaves the turn as it was sent", []session.Event{turn0, turn1,
			stamp(session.AuthorRecorder, 1, turn1), model("summary")}, rewind.Rewind, rewind.ReasonAnchoredRewind},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			state := ledger.Fold(tc.events)
			p := rewind.Decide(rewind.Input{Turns: Turns(tc.events), Checkpoint: state.Checkpoint, Fire: rewind.FireFromResume(resume.Diverged)},
				nil, rewind.DefaultPolicy())
			if p.Decision != tc.want || (tc.reason != "" && p.Reason != tc.reason) {
				t.Fatalf("rewind = %s/%s (%s), want %s/%s", p.Decision, p.Reason, p.Message, tc.want, tc.reason)
			}
		})
	}
}
