package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrewind/agentrewind/internal/engine/bundle"
	"github.com/agentrewind/agentrewind/internal/engine/inspect"
	"github.com/agentrewind/agentrewind/internal/engine/replay"
	"github.com/agentrewind/agentrewind/internal/engine/session"
	"github.com/agentrewind/agentrewind/internal/fsutil"
)

// echoModel answers with the number of messages it was sent.
type echoModel struct{}

func (echoModel) Create(_ context.Context, req session.Request) (*session.Response, error) {
	return &session.Response{Content: json.RawMessage(`[{"type":"text","text":"ok"}]`),
		Usage: &session.Usage{InputTokens: int64(10 * len(req.Messages)), OutputTokens: 2}}, nil
}

func msg(role, text string) session.Message {
	b, _ := json.Marshal(text)
	return session.Message{Role: role, Content: b}
}

// fixtureSession records a small two-turn session for the CLI tests:
// 0 start, 1 model(plan), 2 tool(search), 3 model(answer), 4 end.
func fixtureSession(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fixture")
	tools := map[string]replay.Tool{"search": func(context.Context, json.RawMessage) (any, error) { return []string{"r1"}, nil }}
	_, err := replay.Record(context.Background(), replay.RecordOptions{Dir: dir, ID: "fixture", Model: echoModel{}, Tools: tools}, searchAgent(""))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	return out.String(), err
}

func TestInspectPrintsTheTimeline(t *testing.T) {
	dir := fixtureSession(t)
	out, err := runCLI(t, "inspect", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"session fixture (6 events", "STEP", "model_call", "plan", "fake-1", "10→2", "tool_call", "search", "answer", "30→2"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "inspect", dir, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Meta   session.Meta
		Events []timelineRow
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("inspect -o json: %v\n%s", err, out)
	}
	if len(doc.Events) != 6 || doc.Events[2].What != "search" || len(doc.Events[1].Fingerprint) != 64 {
		t.Fatalf("inspect json events: %+v", doc.Events)
	}
}

func TestContextAndDiffShowThePrompt(t *testing.T) {
	dir := fixtureSession(t)
	out, err := runCLI(t, "context", dir, "--step", "3")
	if err != nil {
		t.Fatal(err)
	}
	if want := "[0] user: find it\n[1] assistant: searching\n[2] user: results: r1\n"; out != want {
		t.Fatalf("context --step 3:\n%s\nwant\n%s", out, want)
	}
	if _, err := runCLI(t, "context", dir, "--step", "2"); err == nil || !strings.Contains(err.Error(), "step 2 is a tool_call, not a model_call") {
		t.Fatalf("context of a tool step: %v", err)
	}
	out, err = runCLI(t, "diff", dir, "--from", "1", "--to", "3")
	if err != nil {
		t.Fatal(err)
	}
	if want := "+ assistant: searching\n+ user: results: r1\ntokens +20\n"; out != want {
		t.Fatalf("diff:\n%s\nwant\n%s", out, want)
	}
	out, err = runCLI(t, "diff", dir, "--from", "1", "--to", "3", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var d inspect.ContextDiff
	if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Added) != 2 || d.TokenDelta != 20 || d.TokenDeltaIsEstimate {
		t.Fatalf("diff json %+v (%v)", d, err)
	}
}

func TestVerifyExitsNonZeroOnCorruption(t *testing.T) {
	dir := fixtureSession(t)
	out, err := runCLI(t, "verify", dir)
	if err != nil || !strings.Contains(out, "session fixture is intact: 6 events") {
		t.Fatalf("verify intact: %v\n%s", err, out)
	}
	events := filepath.Join(dir, session.EventsFile)
	data, _ := os.ReadFile(events)
	if err := os.WriteFile(events, bytes.Replace(data, []byte(`"q":"it"`), []byte(`"q":"IT"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "verify", dir, "-o", "json")
	if exitCode(err) != exitCorrupt || !strings.Contains(err.Error(), "events.jsonl is corrupt or was tampered with") {
		t.Fatalf("verify tampered: exit %d, %v", exitCode(err), err)
	}
	if !strings.Contains(out, `"ok": false`) {
		t.Fatalf("verify -o json on a tampered session printed %s", out)
	}
	if _, err := runCLI(t, "inspect", t.TempDir()); exitCode(err) != exitCorrupt {
		t.Fatalf("inspect of an uncommitted session: exit %d (%v)", exitCode(err), err)
	}
}

func TestPackAndUnpackRoundTrip(t *testing.T) {
	dir := fixtureSession(t)
	out := filepath.Join(t.TempDir(), "fixture.rewind")
	text, err := runCLI(t, "pack", dir, out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "redaction: no secrets matched") || !strings.Contains(text, "wrote "+out) {
		t.Fatalf("pack output:\n%s", text)
	}
	dest := filepath.Join(t.TempDir(), "unpacked")
	text, err = runCLI(t, "unpack", out, dest)
	if err != nil || !strings.Contains(text, "unpacked session fixture") {
		t.Fatalf("unpack: %v\n%s", err, text)
	}
	if _, err := runCLI(t, "verify", dest); err != nil {
		t.Fatalf("the unpacked session does not verify: %v", err)
	}
	// A second unpack into the same, now non-empty directory is refused and changes nothing.
	if _, err := runCLI(t, "unpack", out, dest); exitCode(err) != exitError || !strings.Contains(err.Error(), "new or empty directory") {
		t.Fatalf("unpack into a non-empty directory: exit %d, %v", exitCode(err), err)
	}
}

func TestCompareExitsWithTheDriftCode(t *testing.T) {
	golden, again := fixtureSession(t), fixtureSession(t)
	out, err := runCLI(t, "compare", golden, again)
	if err != nil || !strings.Contains(out, "fixture matches fixture") {
		t.Fatalf("identical runs: %v\n%s", err, out)
	}
	changed := filepath.Join(t.TempDir(), "changed")
	_, err = replay.Record(context.Background(), replay.RecordOptions{Dir: changed, ID: "changed", Model: echoModel{}},
		func(ctx context.Context, ac replay.AgentContext) error {
			_, err := ac.Model(ctx, session.Request{Model: "fake-2", Messages: []session.Message{msg("user", "find it")}}, replay.Site("plan"))
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "compare", golden, changed, "-o", "json")
	if exitCode(err) != exitDrift {
		t.Fatalf("compare of a changed run: exit %d (%v)", exitCode(err), err)
	}
	var result map[string]any
	if jerr := json.Unmarshal([]byte(out), &result); jerr != nil || result["match"] != false || result["divergedAtStep"] != float64(1) {
		t.Fatalf("compare -o json: %s (%v)", out, jerr)
	}
	if !strings.Contains(err.Error(), `request.model: "fake-1" → "fake-2"`) {
		t.Fatalf("the drift does not show the changed field: %v", err)
	}
}

// blobSession records a committed session whose tool result is stored as a blob, and returns its
// directory and the blob's hash.
func blobSession(t *testing.T) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "blobbed")
	w, err := session.Create(dir, session.Meta{ID: "blobbed", FingerprintMode: "strict"}, session.WriterOptions{BlobThreshold: 16})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []session.Event{
		{Step: 0, Lane: "0", Kind: session.KindSessionStart},
		{Step: 1, Seq: 1, Lane: "0", Kind: session.KindToolCall, Name: "fetch", Args: json.RawMessage(`{}`),
			ArgsHash: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", Result: json.RawMessage(`"a result longer than sixteen bytes"`)},
		{Step: 2, Seq: 2, Lane: "0", Kind: session.KindSessionEnd},
	} {
		if err := w.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := w.Close(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := session.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	blobs := session.Blobs(s.Events)
	if len(blobs) != 1 || meta.Events != 3 {
		t.Fatalf("fixture: blobs %v, meta %+v", blobs, meta)
	}
	return dir, blobs[0]
}

// rehash rewrites events.jsonl and recomputes meta.json's hash and count to match.
func rehash(t *testing.T, dir string, edit func(string) string) {
	t.Helper()
	path := filepath.Join(dir, session.EventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	log := edit(string(data))
	meta, err := session.ReadMeta(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(log))
	meta.EventsHash, meta.Events = hex.EncodeToString(sum[:]), int64(strings.Count(log, "\n"))
	metaJSON, _ := json.Marshal(meta)
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, session.MetaFile), metaJSON, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedSessionsExitWithTheCorruptCode runs verify, inspect and compare on every kind of damage
// the readers report; each must exit 2.
func TestDamagedSessionsExitWithTheCorruptCode(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir, blob string)
		want   string
	}{
		{"missing blob", func(t *testing.T, dir, blob string) { _ = os.Remove(filepath.Join(dir, session.BlobPath(blob))) }, "is missing"},
		{"meta.json is not JSON", func(t *testing.T, dir, _ string) {
			_ = os.WriteFile(filepath.Join(dir, session.MetaFile), []byte("not json"), 0o644)
		}, "meta.json"},
		{"eventsHash is not hex", func(t *testing.T, dir, _ string) {
			meta, _ := session.ReadMeta(dir)
			meta.EventsHash = strings.ToUpper(meta.EventsHash)
			b, _ := json.Marshal(meta)
			_ = os.WriteFile(filepath.Join(dir, session.MetaFile), b, 0o644)
		}, "eventsHash"},
		{"events.jsonl is missing", func(t *testing.T, dir, _ string) { _ = os.Remove(filepath.Join(dir, session.EventsFile)) }, "events.jsonl is missing"},
		{"malformed blob reference", func(t *testing.T, dir, blob string) {
			rehash(t, dir, func(log string) string { return strings.Replace(log, blob, "../../../etc/passwd", 1) })
		}, "not a sha256 hex digest"},
		{"duplicate key renames the tool", func(t *testing.T, dir, _ string) {
			rehash(t, dir, func(log string) string {
				return strings.Replace(log, `"name":"fetch"`, `"name":"fetch","name":"wipe"`, 1)
			})
		}, `duplicate key "name"`},
		{"events out of step order", func(t *testing.T, dir, _ string) {
			rehash(t, dir, func(log string) string { return strings.Replace(log, `"step":2`, `"step":1`, 1) })
		}, "steps must strictly increase"},
		{"meta.json miscounts the events", func(t *testing.T, dir, _ string) {
			meta, _ := session.ReadMeta(dir)
			meta.Events = 7
			b, _ := json.Marshal(meta)
			_ = os.WriteFile(filepath.Join(dir, session.MetaFile), b, 0o644)
		}, "records 7 events"},
		{"no session_end", func(t *testing.T, dir, _ string) {
			rehash(t, dir, func(log string) string { lines := strings.SplitAfter(log, "\n"); return strings.Join(lines[:2], "") })
		}, "incomplete (no session_end)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, blob := blobSession(t)
			good, _ := blobSession(t)
			tc.damage(t, dir, blob)
			for _, args := range [][]string{{"verify", dir}, {"verify", dir, "-o", "json"}, {"compare", good, dir}, {"compare", dir, good}} {
				out, err := runCLI(t, args...)
				if exitCode(err) != exitCorrupt || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%v: exit %d, %v; want exit 2 with %q\n%s", args, exitCode(err), err, tc.want, out)
				}
			}
		})
	}
}

func TestVerifyReportsAnIncompleteRunDistinctly(t *testing.T) {
	dir, _ := blobSession(t)
	rehash(t, dir, func(log string) string { lines := strings.SplitAfter(log, "\n"); return strings.Join(lines[:2], "") })
	out, err := runCLI(t, "verify", dir)
	if exitCode(err) != exitCorrupt || !strings.Contains(out, "session blobbed is incomplete (no session_end): 2 events") {
		t.Fatalf("verify: exit %d (%v)\n%s", exitCode(err), err, out)
	}
	out, _ = runCLI(t, "verify", dir, "-o", "json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["ok"] != false || doc["incomplete"] != true {
		t.Fatalf("verify -o json: %s (%v)", out, err)
	}
	// The crashed run still opens for everything that reads it, e.g. inspect (and plan, for resuming).
	if _, err := runCLI(t, "inspect", dir); err != nil {
		t.Fatalf("inspect of a crashed run: %v", err)
	}
}

// TestWritingCommandsRefuseAnOutputInsideTheirInput: pack and resume-plan never write into the
// session they read, however the path is spelled, and leave the session verifying.
func TestWritingCommandsRefuseAnOutputInsideTheirInput(t *testing.T) {
	dir := fixtureSession(t)
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(dir, alias); err != nil {
		t.Skipf("cannot create symlinks here: %v", err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, session.EventsFile))
	for _, out := range []string{
		filepath.Join(dir, session.EventsFile),
		filepath.Join(dir, session.MetaFile),
		filepath.Join(dir, "new.rewind"),
		filepath.Join(dir, session.BlobsDir, "..", session.EventsFile),
		filepath.Join(alias, session.EventsFile),
	} {
		for _, args := range [][]string{{"pack", dir, out}, {"pack", alias, out}, {"engine", "resume-plan", "--session", dir, "--output-file", out}} {
			_, err := runCLI(t, args...)
			var oi *fsutil.OutputInsideInputError
			if !errors.As(err, &oi) || exitCode(err) != exitError {
				t.Fatalf("%v: exit %d, %v; want an *OutputInsideInputError", args, exitCode(err), err)
			}
		}
	}
	after, _ := os.ReadFile(filepath.Join(dir, session.EventsFile))
	if !bytes.Equal(before, after) {
		t.Fatal("the session's log changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "new.rewind")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a bundle was written into the session: %v", err)
	}
	if _, err := runCLI(t, "verify", dir); err != nil {
		t.Fatalf("the session no longer verifies: %v", err)
	}
}

// TestPackFailureKeepsTheExistingBundle: a pack that fails half way — the session opens, but a stray
// file in blobs/ does not hash to its name — leaves a file already at the output path as it was.
func TestPackFailureKeepsTheExistingBundle(t *testing.T) {
	dir, _ := blobSession(t)
	out := filepath.Join(t.TempDir(), "out.rewind")
	if err := os.WriteFile(out, []byte("the previous bundle"), 0o644); err != nil {
		t.Fatal(err)
	}
	stray := sha256.Sum256([]byte("expected"))
	if err := os.WriteFile(filepath.Join(dir, session.BlobPath(hex.EncodeToString(stray[:]))), []byte("actual"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "pack", dir, out); !errors.As(err, new(*bundle.BlobHashError)) || exitCode(err) != exitCorrupt {
		t.Fatalf("pack of a corrupt blobs/: exit %d, %v", exitCode(err), err)
	}
	if data, _ := os.ReadFile(out); string(data) != "the previous bundle" {
		t.Fatalf("the existing bundle became %q", data)
	}
	entries, _ := os.ReadDir(filepath.Dir(out))
	if len(entries) != 1 {
		t.Fatalf("pack left %v beside the output", entries)
	}
}

// TestPackRefusesASymlinkedBlobWithTheCorruptCode: the session opens (blobs are read through the
// link) but pack must not ship a link, and says so with exit 2.
func TestPackRefusesASymlinkedBlobWithTheCorruptCode(t *testing.T) {
	dir, blob := blobSession(t)
	path := filepath.Join(dir, session.BlobPath(blob))
	moved := filepath.Join(t.TempDir(), blob)
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, path); err != nil {
		t.Skipf("cannot create symlinks here: %v", err)
	}
	_, err := runCLI(t, "pack", dir, filepath.Join(t.TempDir(), "out.rewind"))
	var ue *bundle.UnsafeEntryError
	if !errors.As(err, &ue) || exitCode(err) != exitCorrupt {
		t.Fatalf("exit %d, %v; want exit 2 with an *UnsafeEntryError", exitCode(err), err)
	}
}

// runCLIStderr is runCLI returning what the command wrote to stderr too.
func runCLIStderr(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

// TestVerifyRecomputesStoredFingerprints: an edit that keeps the log's hashes consistent but leaves a
// stored fingerprint that is not its stored call's is tampering to verify (exit 2, naming the step
// and field) as it is to compare, and inspect marks the step instead of showing it as fine.
func TestVerifyRecomputesStoredFingerprints(t *testing.T) {
	zeros := strings.Repeat("0", 64)
	cases := []struct {
		name  string
		edit  func(string) string
		step  int64
		field string
	}{
		// The request is stored once, as a definition its digest names: the edit breaks that digest
		// before any fingerprint is recomputed.
		{"a request edited", func(log string) string { return strings.Replace(log, `"model":"fake-1"`, `"model":"fake-9"`, 1) }, 1, "definition"},
		{"only the requestHash edited", func(log string) string {
			i := strings.Index(log, `"requestHash":"`) + len(`"requestHash":"`)
			return log[:i] + zeros + log[i+64:]
		}, 1, "requestHash"},
		{"only the argsHash edited", func(log string) string {
			i := strings.Index(log, `"argsHash":"`) + len(`"argsHash":"`)
			return log[:i] + zeros + log[i+64:]
		}, 2, "argsHash"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, good := fixtureSession(t), fixtureSession(t)
			rehash(t, dir, tc.edit)
			want := fmt.Sprintf("step %d: the stored %s", tc.step, tc.field)
			if tc.field == "definition" {
				want = fmt.Sprintf("the definition at step %d is corrupt or was tampered with", tc.step)
			}
			for _, args := range [][]string{{"verify", dir}, {"verify", dir, "-o", "json"}, {"compare", good, dir}} {
				out, err := runCLI(t, args...)
				if exitCode(err) != exitCorrupt || !strings.Contains(err.Error(), want) {
					t.Fatalf("%v: exit %d, %v; want exit 2 saying %q\n%s", args, exitCode(err), err, want, out)
				}
				if args[0] == "verify" && strings.Contains(out, "intact") {
					t.Fatalf("%v says intact:\n%s", args, out)
				}
			}
			if tc.field == "definition" {
				return // refused as corrupt when it is opened: there is no timeline to mark
			}
			out, stderr, err := runCLIStderr(t, "inspect", dir)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "FORGED:") || !strings.Contains(stderr, want) {
				t.Fatalf("inspect does not mark the forged fingerprint:\n%s\nstderr: %s", out, stderr)
			}
			out, err = runCLI(t, "inspect", dir, "-o", "json")
			if err != nil {
				t.Fatal(err)
			}
			var doc struct{ Events []timelineRow }
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatal(err)
			}
			for _, r := range doc.Events {
				if forged := r.FingerprintMismatch != ""; forged != (r.Step == tc.step) {
					t.Fatalf("inspect -o json step %d: fingerprintMismatch %q", r.Step, r.FingerprintMismatch)
				}
			}
		})
	}
}

// TestVerifyRefusesAMetaJSONThatDisagreesWithTheLog: meta.json edited so that it no longer describes
// its log (the events hash still matches) exits 2 from every session command, naming the field.
func TestVerifyRefusesAMetaJSONThatDisagreesWithTheLog(t *testing.T) {
	cases := []struct {
		name, from, to, field string
	}{
		{"another id", `"id":"fixture"`, `"id":"other"`, "id"},
		{"a parent the log does not record", `"id":"fixture"`, `"id":"fixture","parent":"p","forkedAtStep":1`, "parent"},
		{"a negative forkedAtStep", `"id":"fixture"`, `"id":"fixture","parent":"p","forkedAtStep":-5`, "forkedAtStep"},
		{"schema 1 over schema 3 events", `"schemaVersion":3`, `"schemaVersion":1`, "schemaVersion"},
		{"a schema newer than this build", `"schemaVersion":3`, `"schemaVersion":4`, "schema version 4"},
		{"a fingerprint mode that is not one", `"fingerprintMode":"strict"`, `"fingerprintMode":"loose"`, "fingerprintMode"},
		{"an unknown key", `"id":"fixture"`, `"id":"fixture","zzz":1`, `unknown key "zzz"`},
		{"a key in another case", `"createdAt"`, `"CreatedAt"`, `unknown key "CreatedAt"`},
		{"a key given twice", `"id":"fixture"`, `"id":"fixture","id":"fixture"`, `"id" given twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := fixtureSession(t)
			path := filepath.Join(dir, session.MetaFile)
			data, _ := os.ReadFile(path)
			compact := strings.NewReplacer("\n", "", "  ", "", `": `, `":`).Replace(string(data))
			edited := strings.Replace(compact, tc.from, tc.to, 1)
			if edited == compact {
				t.Fatalf("meta.json has no %s:\n%s", tc.from, compact)
			}
			if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"verify", dir}, {"verify", dir, "-o", "json"}, {"inspect", dir}, {"compare", dir, dir}} {
				out, err := runCLI(t, args...)
				if exitCode(err) != exitCorrupt || !strings.Contains(err.Error(), tc.field) {
					t.Fatalf("%v: exit %d, %v; want exit 2 naming %s\n%s", args, exitCode(err), err, tc.field, out)
				}
			}
		})
	}
}

// hostile is what a bundle from someone else can hold in a call site, a model name or a message: an
// OSC that sets the terminal title, a colour, and a carriage return and line feed that forge a line.
const hostile = "\u001b]0;PWNED\u0007\u001b[31mRED\r\nFAKE LINE\u2028\u202eevil\u0085"

// TestSessionCommandsEscapeTerminalControls: text output shows a recorded control sequence escaped,
// never raw; -o json keeps the exact string.
func TestSessionCommandsEscapeTerminalControls(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hostile")
	_, err := replay.Record(context.Background(), replay.RecordOptions{Dir: dir, ID: "hostile", Model: echoModel{}},
		func(ctx context.Context, ac replay.AgentContext) error {
			req := session.Request{Model: hostile, Messages: []session.Message{msg("user", "first")}}
			if _, err := ac.Model(ctx, req, replay.Site(hostile)); err != nil {
				return err
			}
			req.Messages = append(req.Messages, msg("user", hostile))
			_, err := ac.Model(ctx, req, replay.Site("second"))
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	raw := func(s string) bool {
		return strings.ContainsAny(s, "\u001b\u0007\r\u2028\u202e\u0085") || strings.Contains(s, "\nFAKE LINE")
	}
	for _, args := range [][]string{{"inspect", dir}, {"context", dir, "--step", "2"}, {"diff", dir, "--from", "1", "--to", "2"}} {
		out, stderr, err := runCLIStderr(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if raw(out) || raw(stderr) {
			t.Fatalf("%v prints raw control characters:\n%q\nstderr: %q", args, out, stderr)
		}
		if !strings.Contains(out, `\x1b]0;PWNED\x07\x1b[31mRED\r\nFAKE LINE\u2028\u202eevil\u0085`) {
			t.Fatalf("%v does not show the sequence escaped:\n%s", args, out)
		}
	}
	out, err := runCLI(t, "context", dir, "--step", "2", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []session.Message
	if err := json.Unmarshal([]byte(out), &msgs); err != nil || len(msgs) != 2 || messageText(msgs[1].Content) != hostile {
		t.Fatalf("context -o json does not keep the exact text: %s (%v)", out, err)
	}
	// An error quoting the session is escaped as well: compare's drift names the call site.
	other := fixtureSession(t)
	_, err = runCLI(t, "compare", other, dir)
	if exitCode(err) != exitDrift || raw(err.Error()) {
		t.Fatalf("compare: exit %d, %q", exitCode(err), err)
	}
}

func TestPrintableEscapesOnlyWhatATerminalActsOn(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, tabs\tand ünïcödé": "plain text, tabs\tand ünïcödé",
		"\x00\x1b\x7f\r\n":              `\x00\x1b\x7f\r\n`,
		"\u0085\u009b":                  `\u0085\u009b`,
		"\u2028\u2029":                  `\u2028\u2029`,
		"\u202a\u202e\u2066\u2069":      `\u202a\u202e\u2066\u2069`,
		"bad \xff byte":                 `bad \xff byte`,
		"a real \uFFFD stays":           "a real \uFFFD stays",
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
	if got := printableCell("a\tb"); got != `a\tb` {
		t.Errorf("printableCell keeps a tab: %q", got)
	}
}

// TestAPathWithNoSessionIsAUsageError: a path that does not exist exits 1 ("no session at"); a
// directory without meta.json is an uncommitted session, exit 2.
func TestAPathWithNoSessionIsAUsageError(t *testing.T) {
	good := fixtureSession(t)
	missing := filepath.Join(t.TempDir(), "nonexistent")
	for _, args := range [][]string{{"verify", missing}, {"inspect", missing}, {"compare", good, missing}, {"compare", missing, good}} {
		if _, err := runCLI(t, args...); exitCode(err) != exitError || !strings.Contains(err.Error(), "no session at "+missing) {
			t.Fatalf("%v: exit %d, %v; want exit 1, no session at the path", args, exitCode(err), err)
		}
	}
	empty := t.TempDir()
	for _, args := range [][]string{{"verify", empty}, {"compare", good, empty}} {
		if _, err := runCLI(t, args...); exitCode(err) != exitCorrupt || !errors.Is(err, session.ErrNotCommitted) {
			t.Fatalf("%v: exit %d, %v; want exit 2, not committed", args, exitCode(err), err)
		}
	}
}

// TestInspectWarnsOfAnIncompleteRun: a crashed run opens, with a warning line that it did not finish.
func TestInspectWarnsOfAnIncompleteRun(t *testing.T) {
	dir, _ := blobSession(t)
	_, stderr, err := runCLIStderr(t, "inspect", dir)
	if err != nil || strings.Contains(stderr, "incomplete") {
		t.Fatalf("inspect of a finished run: %v, %q", err, stderr)
	}
	rehash(t, dir, func(log string) string { lines := strings.SplitAfter(log, "\n"); return strings.Join(lines[:2], "") })
	_, stderr, err = runCLIStderr(t, "inspect", dir)
	if err != nil || !strings.Contains(stderr, "warning: session blobbed is incomplete (no session_end)") {
		t.Fatalf("inspect of a crashed run: %v, %q", err, stderr)
	}
}

func TestPackWarnsOfAnIncompleteRunAndStillPacksIt(t *testing.T) {
	dir, _ := blobSession(t)
	rehash(t, dir, func(log string) string { lines := strings.SplitAfter(log, "\n"); return strings.Join(lines[:2], "") })
	out := filepath.Join(t.TempDir(), "crashed.rewind")
	_, stderr, err := runCLIStderr(t, "pack", dir, out)
	if err != nil || !strings.Contains(stderr, "warning: session blobbed is incomplete (no session_end)") {
		t.Fatalf("pack of a crashed run: %v, %q", err, stderr)
	}
	if info, err := os.Stat(out); err != nil || info.Size() == 0 {
		t.Fatalf("the crashed run was not packed: %v", err)
	}
}
