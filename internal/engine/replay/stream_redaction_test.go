package replay

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrewind/agentrewind/internal/engine/bundle"
	"github.com/agentrewind/agentrewind/internal/engine/codec/anthropic"
	"github.com/agentrewind/agentrewind/internal/engine/redact"
	"github.com/agentrewind/agentrewind/internal/engine/session"
)

// streamCanary is a secret of one kind, assembled at run time so the source holds no key-shaped
// string. Every 6-byte window of it holds a character that is not lower-case hex, so no window can
// turn up by chance in the hashes and tokens a recording is full of.
type streamCanary struct {
	kind    string // the pattern name it is counted under
	secret  string
	literal bool   // learned with AddLiteral rather than matched by a built-in pattern
	name    string // what the secret is called in the text ("apiKey" unless set), for key-anchored shapes
}

func (c streamCanary) named() string {
	if c.name == "" {
		return "apiKey"
	}
	return c.name
}

var streamCanaries = []streamCanary{
	{kind: "anthropic-api-key", secret: "sk-ant-" + "api03-" + "CanaryANTHROPICkeyQWERTYuiopZXCVBNMmnbvXZLKJH"},
	{kind: "openai-api-key", secret: "sk-" + "proj-" + "CanaryOPENAIkeyPLMOKNijbuhvYGCTFXrdzqwS"},
	{kind: "github-token", secret: "ghp" + "_" + "CanaryGITHUBtokenQAZWSXplmoknIJBUHVyg"},
	{kind: "aws-access-key-id", secret: "AKIA" + "CANARYQZWXRTYUPK"},
	{kind: "aws-secret-access-key", secret: "CanaryAWSQZKEYqrtvwxyzJ/QRTVWXYZ+mnGHPLK", name: "aws_secret_access_key"},
	{kind: "env-secret", secret: "lit-CanaryFromTheEnvQRSTUVWXYZ-zyxw", literal: true},
}

// streamShape is how a model streams a text: its chunks for the pieces, and the text a consumer
// assembles from chunks.
type streamShape struct {
	name string
	// wrap embeds the secret, under its name, in the text the stream carries; pad makes that text long.
	wrap   func(name, secret string) string
	pad    func(filler, text string) string
	chunks func(pieces []string) []json.RawMessage
	lane   func(t *testing.T, chunks []json.RawMessage) string
	// anthropic shapes are assembled by the codec into the response; the others answer a text block.
	anthropic bool
}

var streamShapes = []streamShape{
	{
		name:   "generic delta",
		wrap:   func(name, s string) string { return "key: " + name + "=" + s + " done" },
		pad:    func(filler, text string) string { return filler + text },
		chunks: genericChunks,
		lane: func(t *testing.T, chunks []json.RawMessage) string {
			return concatLane(t, chunks, func(c json.RawMessage) string {
				var d struct{ Delta string }
				_ = json.Unmarshal(c, &d)
				return d.Delta
			})
		},
	},
	{
		name: "anthropic text_delta",
		wrap: func(name, s string) string { return "key: " + name + "=" + s + " done" },
		pad:  func(filler, text string) string { return filler + text },
		chunks: func(pieces []string) []json.RawMessage {
			return anthropicChunks(textBlockStart, "text_delta", "text", pieces)
		},
		lane:      func(t *testing.T, chunks []json.RawMessage) string { return anthropicLane(t, chunks, "text") },
		anthropic: true,
	},
	{
		name: "anthropic input_json_delta",
		wrap: func(name, s string) string { return `{"` + name + `":"` + s + `","retries":2}` },
		pad:  func(filler, text string) string { return `{"filler":"` + filler + `",` + text[1:] },
		chunks: func(pieces []string) []json.RawMessage {
			return anthropicChunks(toolBlockStart, "input_json_delta", "partial_json", pieces)
		},
		lane:      func(t *testing.T, chunks []json.RawMessage) string { return anthropicLane(t, chunks, "partial_json") },
		anthropic: true,
	},
}

func genericChunks(pieces []string) []json.RawMessage {
	var out []json.RawMessage
	for _, p := range pieces {
		b, _ := json.Marshal(map[string]string{"delta": p})
		out = append(out, b)
	}
	return out
}

const (
	textBlockStart = `{"type":"text","text":""}`
	toolBlockStart = `{"type":"tool_use","id":"toolu_01","name":"configure","input":{}}`
)

// anthropicChunks is a Messages stream of one content block, in the codec's chunk shape.
func anthropicChunks(blockStart, deltaType, field string, pieces []string) []json.RawMessage {
	event := func(name, data string) json.RawMessage {
		return json.RawMessage(`{"event":"` + name + `","data":` + data + `}`)
	}
	out := []json.RawMessage{
		event("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`),
		event("content_block_start", `{"type":"content_block_start","index":0,"content_block":`+blockStart+`}`),
		event("ping", `{"type":"ping"}`),
	}
	for _, p := range pieces {
		q, _ := json.Marshal(p)
		out = append(out, event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"`+deltaType+`","`+field+`":`+string(q)+`}}`))
	}
	return append(out,
		event("content_block_stop", `{"type":"content_block_stop","index":0}`),
		event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":30}}`),
		event("message_stop", `{"type":"message_stop"}`))
}

func concatLane(t *testing.T, chunks []json.RawMessage, piece func(json.RawMessage) string) string {
	t.Helper()
	var b strings.Builder
	for _, c := range chunks {
		if !json.Valid(c) {
			t.Fatalf("a served chunk is not JSON: %s", c)
		}
		b.WriteString(piece(c))
	}
	return b.String()
}

func anthropicLane(t *testing.T, chunks []json.RawMessage, field string) string {
	return concatLane(t, chunks, func(c json.RawMessage) string {
		var ev struct {
			Data struct {
				Delta map[string]string `json:"delta"`
			} `json:"data"`
		}
		_ = json.Unmarshal(c, &ev)
		return ev.Data.Delta[field]
	})
}

// assemble is the response the codec assembles from chunks, as the SDK would.
func assemble(t *testing.T, chunks []json.RawMessage) session.Response {
	t.Helper()
	var cs []session.Chunk
	for _, c := range chunks {
		cs = append(cs, session.Chunk{Data: c})
	}
	resp, _, err := anthropic.Codec{}.NormalizeStream(anthropic.Codec{}.RebuildStream(cs))
	if err != nil {
		t.Fatalf("the stream does not assemble: %v", err)
	}
	return resp
}

// streamScript is what a scripted model streams for the request whose user message is its key.
type streamScript map[string][]json.RawMessage

// scriptedModel streams the chunks its script holds for a request and answers with the response
// they assemble, as a real provider does. It fails any request it has no script for.
type scriptedModel struct {
	t       *testing.T
	shape   streamShape
	scripts streamScript
	full    string // the text every script carries, for the generic shape's response
}

func (m *scriptedModel) Create(context.Context, session.Request) (*session.Response, error) {
	m.t.Error("the model was asked for a non-streamed answer")
	return nil, fmt.Errorf("not scripted")
}

func (m *scriptedModel) Stream(_ context.Context, req session.Request, emit func(json.RawMessage) error) (*session.Response, error) {
	chunks, ok := m.scripts[lastUser(req)]
	if !ok {
		m.t.Errorf("no script for %q", lastUser(req))
		return nil, fmt.Errorf("not scripted")
	}
	for _, c := range chunks {
		if err := emit(c); err != nil {
			return nil, err
		}
	}
	if m.shape.anthropic {
		resp := assemble(m.t, chunks)
		return &resp, nil
	}
	content, _ := json.Marshal([]map[string]string{{"type": "text", "text": m.full}})
	return &session.Response{Content: content, StopReason: "end_turn"}, nil
}

// served is what one streamed call handed the agent.
type served struct {
	chunks []json.RawMessage
	resp   *session.Response
}

// streamingAgent makes one streamed call per script key, in order, and keeps what each was served.
func streamingAgent(keys []string, out map[string]served) Harness {
	return func(ctx context.Context, ac AgentContext) error {
		for _, k := range keys {
			var chunks []json.RawMessage
			resp, err := ac.ModelStream(ctx, session.Request{Model: "m", Messages: []session.Message{userMessage(k)}}, func(c json.RawMessage) error {
				chunks = append(chunks, append(json.RawMessage(nil), c...))
				return nil
			}, Site("stream"))
			if err != nil {
				return err
			}
			out[k] = served{chunks: chunks, resp: resp}
		}
		return nil
	}
}

// cutsOf splits text in two at every offset, and in three at every pair of offsets taken from the
// secret's edges (two bytes either side of its start and its end) and every third byte inside it.
// Every pair over every offset is covered without storage by the redact package's own tests; the
// bound keeps this end-to-end check, which records, packs and replays each call, to a few seconds.
func cutsOf(text, secret string) [][]int {
	var cuts [][]int
	for a := 0; a <= len(text); a++ {
		cuts = append(cuts, []int{a})
	}
	first := strings.Index(text, secret)
	last := first + len(secret)
	var offsets []int
	for o := max(first-2, 0); o <= min(last+2, len(text)); o++ {
		if o <= first+2 || o >= last-2 || (o-first)%3 == 0 {
			offsets = append(offsets, o)
		}
	}
	for i, a := range offsets {
		for _, b := range offsets[i+1:] {
			cuts = append(cuts, []int{a, b})
		}
	}
	return cuts
}

func piecesOf(text string, cuts []int) []string {
	var out []string
	last := 0
	for _, c := range cuts {
		out = append(out, text[last:c])
		last = c
	}
	return append(out, text[last:])
}

func cutsKey(cuts []int) string {
	var parts []string
	for _, c := range cuts {
		parts = append(parts, strconv.Itoa(c))
	}
	return "cuts " + strings.Join(parts, ",")
}

// TestAStreamedSecretIsRedactedWhateverTheChunkBoundaries records, for each kind of secret and each
// stream shape, one streamed call per way of cutting the text into two or three chunks, then checks
// every stored byte, the bundle, and what a replay serves.
func TestAStreamedSecretIsRedactedWhateverTheChunkBoundaries(t *testing.T) {
	for _, canary := range streamCanaries {
		for _, shape := range streamShapes {
			t.Run(canary.kind+"/"+shape.name, func(t *testing.T) {
				t.Parallel()
				checkCanaryIsWellChosen(t, canary.secret)
				text := shape.wrap(canary.named(), canary.secret)
				want := strings.Replace(text, canary.secret, redact.Token(canary.secret), 1)
				scripts := streamScript{}
				var keys []string
				for _, cuts := range cutsOf(text, canary.secret) {
					k := cutsKey(cuts)
					keys = append(keys, k)
					scripts[k] = shape.chunks(piecesOf(text, cuts))
				}
				// One call long enough for its stream to be stored as a blob.
				long := shape.pad(strings.Repeat("lorem ipsum dolor sit amet ", 700), text)
				mid := strings.Index(long, canary.secret) + len(canary.secret)/2
				scripts["blob"] = shape.chunks([]string{long[:mid-100], long[mid-100 : mid], long[mid:]})
				keys = append(keys, "blob")
				originals := map[string]string{"blob": long}

				dir, keyFile := recordStreams(t, canary, shape, scripts, keys, text)
				assertNoCanaryPiece(t, dir, canary.secret)
				if entries, _ := os.ReadDir(filepath.Join(dir, session.BlobsDir)); len(entries) == 0 {
					t.Fatal("no stream was stored as a blob, so blobs were not checked")
				}

				s, err := session.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				stored := map[string]*session.Response{}
				for _, ev := range s.Events {
					if ev.Kind == session.KindModelCall {
						stored[lastUser(*ev.Request)] = ev.Response
					}
				}
				// Without the vault key, as a shared bundle replays: the served stream assembles to the
				// redacted text and, for Anthropic, to the recorded (redacted) response.
				got := map[string]served{}
				if _, err := Replay(context.Background(), ReplayOptions{Session: s}, streamingAgent(keys, got)); err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					wantLane := want
					if k == "blob" {
						wantLane = strings.Replace(long, canary.secret, redact.Token(canary.secret), 1)
					}
					if lane := shape.lane(t, got[k].chunks); lane != wantLane {
						t.Fatalf("%s: the replayed stream assembles to\n%q\nwant\n%q", k, lane, wantLane)
					}
					if shape.anthropic {
						assembled := assemble(t, got[k].chunks)
						if diff := cmp.Diff(compactJSON(t, stored[k].Content), compactJSON(t, assembled.Content)); diff != "" {
							t.Fatalf("%s: the replayed stream assembles to another message than the recorded response (-recorded +assembled):\n%s", k, diff)
						}
						if !strings.Contains(string(assembled.Content), redact.Token(canary.secret)) {
							t.Fatalf("%s: the assembled message does not carry the token: %s", k, assembled.Content)
						}
					}
				}
				// With the key, the token restores the secret in the chunk where it started, and the
				// stream assembles to the original text.
				got = map[string]served{}
				if _, err := Replay(context.Background(), ReplayOptions{Config: Config{Keys: keyFile}, Session: s}, streamingAgent(keys, got)); err != nil {
					t.Fatal(err)
				}
				for _, k := range keys {
					wantLane := text
					if o, ok := originals[k]; ok {
						wantLane = o
					}
					if lane := shape.lane(t, got[k].chunks); lane != wantLane {
						t.Fatalf("%s: the restored stream assembles to %q, want the original", k, lane)
					}
				}
			})
		}
	}
}

// recordStreams records one streamed call per key and returns the session directory and the vault key.
func recordStreams(t *testing.T, canary streamCanary, shape streamShape, scripts streamScript, keys []string, text string) (string, redact.KeyProvider) {
	t.Helper()
	red := redact.New(redact.BuiltinPatterns())
	if canary.literal {
		red.AddLiteral(canary.kind, canary.secret)
	}
	keyFile := redact.FileKeyProvider{Path: filepath.Join(t.TempDir(), "vault.key")}
	cfg := liveEntropy()
	cfg.Redactor, cfg.Keys = red, keyFile
	var logged []string
	cfg.Logf = func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
	model := &scriptedModel{t: t, shape: shape, scripts: scripts, full: text}
	dir := filepath.Join(t.TempDir(), "rec")
	live := map[string]served{}
	rec, err := Record(context.Background(), RecordOptions{Config: cfg, Dir: dir, Model: model}, streamingAgent(keys, live))
	if err != nil || rec.HarnessErr != nil {
		t.Fatal(err, rec.HarnessErr)
	}
	if len(logged) > 0 {
		t.Fatalf("a stream that redaction can rewrite was dropped: %v", logged)
	}
	// Only storage is redacted: the agent saw the secret live.
	if !strings.Contains(shape.lane(t, live[keys[0]].chunks), canary.secret) {
		t.Fatal("the live stream handed to the agent was redacted")
	}
	// Each call redacted the secret once in its response and once in its stream.
	if n := rec.Meta.Redaction.Counts[canary.kind]; n != 2*len(keys) {
		t.Errorf("%s redacted %d times over %d calls, want twice per call", canary.kind, n, len(keys))
	}
	return dir, keyFile
}

// checkCanaryIsWellChosen fails a test whose canary could match stored bytes by chance.
func checkCanaryIsWellChosen(t *testing.T, secret string) {
	t.Helper()
	for i := 0; i+canaryWindow <= len(secret); i++ {
		if strings.Trim(secret[i:i+canaryWindow], "0123456789abcdef") == "" {
			t.Fatalf("canary window %q is all hex", secret[i:i+canaryWindow])
		}
	}
}

// canaryWindow is the length of the canary pieces searched for: a secret split across chunks and
// stored in the clear leaves pieces at least this long in storage.
const canaryWindow = 6

// assertNoCanaryPiece fails if any stored byte of the session — every file, including blobs and
// meta.json — or of a bundle packed from it holds the secret, its base64 or JSON-escaped form, or any
// piece of it of canaryWindow bytes.
func assertNoCanaryPiece(t *testing.T, dir, secret string) {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		files[path] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{session.EventsFile, session.MetaFile} {
		if _, ok := files[filepath.Join(dir, name)]; !ok {
			t.Fatalf("the session has no %s", name)
		}
	}
	var archive bytes.Buffer
	summary, err := bundle.Pack(context.Background(), dir, &archive)
	if err != nil {
		t.Fatal(err)
	}
	if summary.RedactionTokens[redact.Token(secret)] == 0 {
		t.Errorf("the pack summary does not show the secret's token: %v", summary.RedactionTokens)
	}
	zr, err := gzip.NewReader(&archive)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files["bundle:"+h.Name] = body
	}
	escaped, _ := json.Marshal(secret)
	forms := []string{secret, string(escaped[1 : len(escaped)-1]), base64.StdEncoding.EncodeToString([]byte(secret)), base64.RawURLEncoding.EncodeToString([]byte(secret))}
	for i := 0; i+canaryWindow <= len(secret); i++ {
		forms = append(forms, secret[i:i+canaryWindow])
	}
	for name, data := range files {
		for _, f := range forms {
			if i := bytes.Index(data, []byte(f)); i >= 0 {
				t.Fatalf("%s holds %q of the secret in the clear: …%s…", name, f, data[max(i-80, 0):min(i+80, len(data))])
			}
		}
	}
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return b.String()
}

// TestASecretStraddlingTwoLanesIsNotStoredInTheClear: the secret starts in a content block's start
// and ends in its delta, two lanes no rewrite of one lane can stitch. None of the chunks is stored:
// with the Anthropic codec the stream is rewritten from the redacted response, so a replay still
// streams what the SDK accumulates to the recorded response (and, with the vault, to the original);
// with a codec that cannot write streams the call is kept without one and replays its response.
func TestASecretStraddlingTwoLanesIsNotStoredInTheClear(t *testing.T) {
	codecs := []struct {
		name        string
		codec       Codec
		synthesizes bool
	}{{"generic", GenericCodec{}, false}, {"anthropic", anthropic.Codec{}, true}}
	for _, canary := range []streamCanary{streamCanaries[0], streamCanaries[5]} {
		for _, cd := range codecs {
			t.Run(canary.kind+"/"+cd.name, func(t *testing.T) {
				t.Parallel()
				text := "key: " + canary.secret + " done"
				first := strings.Index(text, canary.secret)
				scripts := streamScript{}
				originals := map[string]session.Response{}
				var keys []string
				for k := first + 1; k < first+len(canary.secret); k++ {
					start, _ := json.Marshal(map[string]string{"type": "text", "text": text[:k]})
					key := "straddle " + strconv.Itoa(k)
					keys = append(keys, key)
					scripts[key] = anthropicChunks(string(start), "text_delta", "text", []string{text[k:]})
					originals[key] = assemble(t, scripts[key])
				}
				red := redact.New(redact.BuiltinPatterns())
				if canary.literal {
					red.AddLiteral(canary.kind, canary.secret)
				}
				keyFile := redact.FileKeyProvider{Path: filepath.Join(t.TempDir(), "vault.key")}
				cfg := liveEntropy()
				cfg.Redactor, cfg.Keys, cfg.Codec = red, keyFile, cd.codec
				var replaced int
				cfg.Logf = func(f string, a ...any) {
					if strings.Contains(f, "straddles its chunks") {
						replaced++
					}
				}
				dir := filepath.Join(t.TempDir(), "rec")
				model := &scriptedModel{t: t, shape: streamShapes[1], scripts: scripts}
				live := map[string]served{}
				if rec, err := Record(context.Background(), RecordOptions{Config: cfg, Dir: dir, Model: model}, streamingAgent(keys, live)); err != nil || rec.HarnessErr != nil {
					t.Fatal(err, rec.HarnessErr)
				}
				assertNoCanaryPiece(t, dir, canary.secret)
				if replaced != len(keys) {
					t.Fatalf("%d of %d straddling streams were reported replaced", replaced, len(keys))
				}
				if got := anthropicLane(t, live[keys[0]].chunks, "text"); !strings.Contains(got, text[first+1:]) {
					t.Fatalf("the agent was not streamed to live: %q", got)
				}

				s, err := session.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				stored := map[string]*session.Response{}
				for _, ev := range s.Events {
					if ev.Kind != session.KindModelCall {
						continue
					}
					if !cd.synthesizes && len(ev.Stream) != 0 {
						t.Fatalf("step %d: a straddling stream was stored", ev.Step)
					}
					stored[lastUser(*ev.Request)] = ev.Response
				}
				for _, vault := range []redact.KeyProvider{nil, keyFile} {
					got := map[string]served{}
					if _, err := Replay(context.Background(), ReplayOptions{Config: Config{Keys: vault, Codec: cd.codec}, Session: s}, streamingAgent(keys, got)); err != nil {
						t.Fatal(err)
					}
					for _, k := range keys {
						want := *stored[k]
						if vault != nil {
							want = originals[k]
						} else if !strings.Contains(string(want.Content), redact.Token(canary.secret)) {
							t.Fatalf("%s: the recorded response is not redacted: %s", k, want.Content)
						}
						if diff := cmp.Diff(compactJSON(t, want.Content), compactJSON(t, got[k].resp.Content)); diff != "" {
							t.Fatalf("%s (vault %v): replay returned another response (-want +replayed):\n%s", k, vault != nil, diff)
						}
						if !cd.synthesizes {
							if len(got[k].chunks) != 0 {
								t.Fatalf("%s: replay emitted %d chunks of a dropped stream", k, len(got[k].chunks))
							}
							continue
						}
						assembled := assemble(t, got[k].chunks)
						if diff := cmp.Diff(compactJSON(t, want.Content), compactJSON(t, assembled.Content)); diff != "" {
							t.Fatalf("%s (vault %v): the replayed stream assembles to another message (-want +assembled):\n%s", k, vault != nil, diff)
						}
					}
				}
			})
		}
	}
}
