package redact

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// textChunk is a generic stream chunk carrying one piece of text.
func textChunk(piece string) []byte {
	b, _ := json.Marshal(map[string]string{"delta": piece})
	return b
}

// anthropicDelta is an Anthropic content_block_delta chunk of block index.
func anthropicDelta(index int, deltaType, field, piece string) []byte {
	delta, _ := json.Marshal(map[string]string{"type": deltaType, field: piece})
	data, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": index, "delta": json.RawMessage(delta)})
	b, _ := json.Marshal(map[string]any{"event": "content_block_delta", "data": json.RawMessage(data)})
	return b
}

// laneText concatenates the string at path (member names) of every chunk that has one.
func laneText(t *testing.T, chunks [][]byte, path ...string) string {
	t.Helper()
	var b strings.Builder
	for _, c := range chunks {
		var v any
		if err := json.Unmarshal(c, &v); err != nil {
			t.Fatalf("chunk %s: %v", c, err)
		}
		for _, p := range path {
			m, _ := v.(map[string]any)
			v = m[p]
		}
		s, _ := v.(string)
		b.WriteString(s)
	}
	return b.String()
}

// split cuts s at the given offsets.
func split(s string, cuts ...int) []string {
	var out []string
	last := 0
	for _, c := range cuts {
		out = append(out, s[last:c])
		last = c
	}
	return append(out, s[last:])
}

func TestStreamRedactsASecretWhateverTheChunkBoundaries(t *testing.T) {
	kinds := []struct{ name, secret string }{
		{"anthropic", fakeAnthropicKey},
		{"openai", fakeOpenAIProj},
		{"github", fakeGitHubPAT},
		{"aws", fakeAWSKeyID},
		{"literal", "pw-" + strings.Repeat("Lit3ral", 3)},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			text := "the key is " + k.secret + " — keep it safe"
			want := strings.Replace(text, k.secret, Token(k.secret), 1)
			first := strings.Index(text, k.secret)
			last := first + len(k.secret)
			r := New(BuiltinPatterns())
			r.AddLiteral("env-secret", kinds[4].secret)
			check := func(t *testing.T, cuts []int) {
				var chunks [][]byte
				for _, p := range split(text, cuts...) {
					chunks = append(chunks, textChunk(p))
				}
				got, err := r.Stream(chunks)
				if err != nil {
					t.Fatalf("cuts %v: %v", cuts, err)
				}
				if lane := laneText(t, got, "delta"); lane != want {
					t.Fatalf("cuts %v: lane assembles to %q, want %q", cuts, lane, want)
				}
				for i, c := range got {
					if strings.Contains(string(c), k.secret[len(k.secret)/2:]) || strings.Contains(string(c), k.secret[:len(k.secret)/2]) {
						t.Fatalf("cuts %v: chunk %d holds half the secret: %s", cuts, i, c)
					}
				}
				if r.Secrets()[Token(k.secret)] != k.secret {
					t.Fatalf("cuts %v: the secret is not remembered for the vault", cuts)
				}
			}
			for a := first - 1; a <= last+1; a++ {
				check(t, []int{a})
				for b := a; b <= last+1; b++ {
					check(t, []int{a, b})
				}
			}
		})
	}
}

func TestStreamLeavesTheTokenInTheChunkWhereTheSecretStarts(t *testing.T) {
	r := New(BuiltinPatterns())
	text := "x " + fakeGitHubPAT + " y"
	pieces := split(text, 5, 20, 30)
	var chunks [][]byte
	for _, p := range pieces {
		chunks = append(chunks, textChunk(p))
	}
	got, err := r.Stream(chunks)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"delta":"x ` + Token(fakeGitHubPAT) + `"}`, `{"delta":""}`, `{"delta":""}`, `{"delta":" y"}`}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(string(joinLines(got)), "\n"), "\n")); diff != "" {
		t.Fatalf("chunks (-want +got):\n%s", diff)
	}
}

func joinLines(chunks [][]byte) []byte {
	var b []byte
	for _, c := range chunks {
		b = append(append(b, c...), '\n')
	}
	return b
}

func TestStreamKeepsLanesApart(t *testing.T) {
	tests := []struct {
		name   string
		chunks [][]byte
		lanes  map[string][]string // chunk path → want lane text
	}{
		{
			name: "anthropic text and tool input blocks interleaved",
			chunks: func() [][]byte {
				text := split("see "+fakeAnthropicKey, 10, 40)
				input := split(`{"apiKey":"`+fakeOpenAIProj+`"}`, 15, 33)
				return [][]byte{
					anthropicDelta(0, "text_delta", "text", text[0]),
					anthropicDelta(1, "input_json_delta", "partial_json", input[0]),
					anthropicDelta(0, "text_delta", "text", text[1]),
					anthropicDelta(1, "input_json_delta", "partial_json", input[1]),
					anthropicDelta(0, "text_delta", "text", text[2]),
					anthropicDelta(1, "input_json_delta", "partial_json", input[2]),
				}
			}(),
			lanes: map[string][]string{
				"text":         {"see " + Token(fakeAnthropicKey)},
				"partial_json": {`{"apiKey":"` + Token(fakeOpenAIProj) + `"}`},
			},
		},
		{
			name: "openai choices and tool calls named by index, not position",
			chunks: [][]byte{
				[]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"k\":\"ghp_"}}]}}]}`),
				[]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}},{"index":1,"function":{"arguments":"` + fakeGitHubPAT[4:] + `\"}"}}]}}]}`),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := New(BuiltinPatterns()).Stream(tt.chunks)
			if err != nil {
				t.Fatal(err)
			}
			for field, want := range tt.lanes {
				var lane strings.Builder
				for _, c := range got {
					var ch struct {
						Data struct {
							Delta map[string]string `json:"delta"`
						} `json:"data"`
					}
					_ = json.Unmarshal(c, &ch)
					lane.WriteString(ch.Data.Delta[field])
				}
				if lane.String() != want[0] {
					t.Errorf("%s lane assembles to %q, want %q", field, lane.String(), want[0])
				}
			}
			for i, c := range got {
				if strings.Contains(string(c), fakeGitHubPAT[10:20]) || strings.Contains(string(c), fakeAnthropicKey[20:36]) {
					t.Errorf("chunk %d holds a piece of a secret: %s", i, c)
				}
			}
			if tt.lanes == nil && !strings.Contains(string(got[0]), Token(fakeGitHubPAT)) {
				t.Errorf("the token is not in the chunk where the secret starts: %s", got[0])
			}
		})
	}
}

func TestStreamFailsClosedWhenASecretStraddlesLanes(t *testing.T) {
	head, tail := fakeAnthropicKey[:30], fakeAnthropicKey[30:]
	start := func(text string) []byte {
		return []byte(`{"event":"content_block_start","data":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"` + text + `"}}}`)
	}
	tests := []struct {
		name    string
		chunks  [][]byte
		prepare func(r *Redactor) // what the redactor knows before the stream
	}{
		{
			name:   "a block's start text and its delta, the whole secret known from the response",
			chunks: [][]byte{start("key " + head), anthropicDelta(0, "text_delta", "text", tail)},
			prepare: func(r *Redactor) {
				r.String("key " + fakeAnthropicKey) // the assembled response was redacted first
			},
		},
		{
			name:    "a learned literal across two content blocks",
			chunks:  [][]byte{anthropicDelta(0, "text_delta", "text", "pw "+"Hunter2-"), anthropicDelta(1, "text_delta", "text", "Correct-Horse")},
			prepare: func(r *Redactor) { r.AddLiteral("env-secret", "Hunter2-Correct-Horse") },
		},
		{
			name:    "an escaped secret in a tool call's partial JSON",
			chunks:  [][]byte{anthropicDelta(0, "input_json_delta", "partial_json", `{"k":"`+escapeEvery(fakeAnthropicKey, 8)+`"}`)},
			prepare: func(r *Redactor) { r.String(fakeAnthropicKey) },
		},
		{
			name:    "a short literal, too short to recognise by a piece, across two content blocks",
			chunks:  [][]byte{anthropicDelta(0, "text_delta", "text", "pw Pa5"), anthropicDelta(1, "text_delta", "text", "5word!x and more")},
			prepare: func(r *Redactor) { r.AddLiteral("env-secret", "Pa55word!x") },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(BuiltinPatterns())
			tt.prepare(r)
			before := r.Counts()
			got, err := r.Stream(tt.chunks)
			if !errors.Is(err, ErrStreamExposed) || got != nil {
				t.Fatalf("Stream() = %s, %v; want no chunks and ErrStreamExposed", joinLines(got), err)
			}
			if diff := cmp.Diff(before, r.Counts()); diff != "" {
				t.Errorf("a failed stream was counted (-before +after):\n%s", diff)
			}
		})
	}
}

// escapeEvery spells every n-th byte of s as a JSON \u escape, so no run of n bytes of s is left.
func escapeEvery(s string, n int) string {
	var b strings.Builder
	for i := range len(s) {
		if i%n == 0 {
			fmt.Fprintf(&b, `\u%04x`, s[i])
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func TestStreamIsPlainJSONRedactionForOneChunk(t *testing.T) {
	doc := `{ "a": "x", "n": 1.50, "` + fakeGitHubPAT + `": ["<b>", true, null, {"AWS_SECRET_ACCESS_KEY": "` + fakeAWSSecret + `"}] }`
	want, err := New(BuiltinPatterns()).JSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got, err := New(BuiltinPatterns()).Stream([][]byte{[]byte(doc)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got[0])); diff != "" {
		t.Fatalf("Stream and JSON differ (-JSON +Stream):\n%s", diff)
	}
}

func TestStreamRejectsAChunkThatIsNotJSON(t *testing.T) {
	for _, bad := range []string{`{"a":`, `{"a":1} x`, ``, `{"a" 1}`} {
		_, err := New(BuiltinPatterns()).Stream([][]byte{textChunk("ok"), []byte(bad)})
		if _, ok := errors.AsType[*JSONError](err); !ok {
			t.Errorf("Stream(%q) error = %v, want a *JSONError", bad, err)
		}
	}
}

// BenchmarkStreamOfCleanChunks compares redacting a 200-chunk Anthropic text stream with no secret
// as one stream against redacting each chunk on its own with JSON (what recording did before), over
// the same chunks: the price of redaction that holds across chunk boundaries.
func BenchmarkStreamOfCleanChunks(b *testing.B) {
	var chunks [][]byte
	for i := range 200 {
		chunks = append(chunks, anthropicDelta(0, "text_delta", "text", fmt.Sprintf("word %d of a long answer, ", i)))
	}
	r := New(BuiltinPatterns())
	b.Run("Stream", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Stream(chunks); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("JSON per chunk", func(b *testing.B) {
		for b.Loop() {
			for _, c := range chunks {
				if _, err := r.JSON(c); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func TestStreamDoesNotMistakeATokenForAShortSecret(t *testing.T) {
	r := New(BuiltinPatterns())
	short := Token(fakeGitHubPAT)[len(TokenPrefix)+2 : len(TokenPrefix)+6] // 4 hex characters of the token
	r.AddLiteral("env-secret", short)
	got, err := r.Stream([][]byte{textChunk("x " + fakeGitHubPAT[:20]), textChunk(fakeGitHubPAT[20:] + " y")})
	if err != nil {
		t.Fatalf("a stream whose only trace of a secret is inside a token failed: %v", err)
	}
	if lane := laneText(t, got, "delta"); lane != "x "+Token(fakeGitHubPAT)+" y" {
		t.Fatalf("lane %q", lane)
	}
}

// TestStreamRefusesInvalidTextInsteadOfRepairingIt: as JSON does, with the offset in the chunk, and
// whichever chunk holds it.
func TestStreamRefusesInvalidTextInsteadOfRepairingIt(t *testing.T) {
	tests := []struct {
		name       string
		chunk      string
		wantOffset int64
		wantReason string
	}{
		{"invalid byte in a text delta", `{"delta":"x` + "\xff" + `y"}`, 11, reasonBadUTF8},
		{"truncated rune in a key", `{"` + "\xe2\x82" + `":"x"}`, 2, reasonBadUTF8},
		{"lone surrogate escape", `{"delta":"x\ud800"}`, 11, reasonSurrogate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(BuiltinPatterns())
			got, err := r.Stream([][]byte{textChunk("ok " + fakeGitHubPAT), []byte(tt.chunk)})
			terr, ok := errors.AsType[*TextError](err)
			if !ok || got != nil {
				t.Fatalf("Stream() = %s, %v; want no chunks and a *TextError", joinLines(got), err)
			}
			if terr.Offset != tt.wantOffset || terr.Reason != tt.wantReason || !strings.HasPrefix(err.Error(), "chunk 1: ") {
				t.Errorf("error %v at %d (%s), want chunk 1 at %d (%s)", err, terr.Offset, terr.Reason, tt.wantOffset, tt.wantReason)
			}
			if len(r.Secrets()) != 0 {
				t.Error("a refused stream recorded secrets")
			}
		})
	}
}
