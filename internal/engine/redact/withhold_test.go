package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const withheldKey1 = "sk-ant-api03-Wh1thh3ldK3yF0rT3sts-abcdefghij"

// deltaChunk is an Anthropic text delta as the codec's chunk.
func deltaChunk(index int, text string) []byte {
	t, _ := json.Marshal(text)
	return fmt.Appendf(nil, `{"event":"content_block_delta","data":{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}}`, index, t)
}

var pingChunk = []byte(`{"event":"ping","data":{"type":"ping"}}`)

// runWithheld feeds chunks (closing after those in closes) and returns what is released, in order.
func runWithheld(t *testing.T, w *Withholder, chunks [][]byte, closes map[int]bool) [][]byte {
	t.Helper()
	s := w.Stream()
	var out [][]byte
	for i, c := range chunks {
		got, err := s.Next(c, closes[i])
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		out = append(out, got...)
	}
	rest, err := s.End()
	if err != nil {
		t.Fatalf("end: %v", err)
	}
	return append(out, rest...)
}

// assembledText joins the text deltas of block index, as an SDK assembles them.
func assembledText(t *testing.T, chunks [][]byte, index int) string {
	t.Helper()
	var b strings.Builder
	for _, c := range chunks {
		var ev struct {
			Data struct {
				Index *int `json:"index"`
				Delta struct {
					Text string `json:"text"`
				} `json:"delta"`
			} `json:"data"`
		}
		if err := json.Unmarshal(c, &ev); err != nil {
			t.Fatalf("released chunk %s: %v", c, err)
		}
		if ev.Data.Index != nil && *ev.Data.Index == index {
			b.WriteString(ev.Data.Delta.Text)
		}
	}
	return b.String()
}

// TestAWithheldSecretSplitAtEveryByteNeverReachesTheAgent: the key cut at every byte boundary, into
// two and into three deltas, with a ping between the pieces, assembles to the text with the key's
// token in its place; no released chunk, nor all of them together, holds the key or a piece that
// leaves its rest to the next chunk, and every chunk is released, in order.
func TestAWithheldSecretSplitAtEveryByteNeverReachesTheAgent(t *testing.T) {
	w := NewWithholder(withheldKey1)
	text := "the key is " + withheldKey1 + " and that is all"
	want := strings.ReplaceAll(text, withheldKey1, Token(withheldKey1))
	start := strings.Index(text, withheldKey1)
	for cut := start; cut <= start+len(withheldKey1); cut++ {
		for _, split := range [][]int{{cut}, {cut, min(cut+7, len(text))}, {start + 1, cut}} {
			var chunks [][]byte
			prev := 0
			for _, at := range append(split, len(text)) {
				if at < prev {
					continue
				}
				chunks = append(chunks, deltaChunk(0, text[prev:at]), pingChunk)
				prev = at
			}
			out := runWithheld(t, w, chunks, nil)
			if len(out) != len(chunks) {
				t.Fatalf("split %v: %d chunks released of %d", split, len(out), len(chunks))
			}
			all := bytes.Join(out, nil)
			if bytes.Contains(all, []byte(withheldKey1)) {
				t.Fatalf("split %v: the key reached the agent: %s", split, all)
			}
			if got := assembledText(t, out, 0); got != want {
				t.Fatalf("split %v: assembled %q, want %q", split, got, want)
			}
		}
	}
}

// TestAWithheldStreamReleasesEachChunkAsSoonAsNoSecretCanRunThroughIt: a chunk is held only while its
// lane ends with the head of a secret, and released with the next piece that settles it; a stream
// without such a tail is passed on chunk for chunk, byte for byte.
func TestAWithheldStreamReleasesEachChunkAsSoonAsNoSecretCanRunThroughIt(t *testing.T) {
	w := NewWithholder(withheldKey1)
	s := w.Stream()
	steps := []struct {
		chunk    []byte
		released int
	}{
		{deltaChunk(0, "hello"), 1},
		{deltaChunk(0, " world, a pie"), 1},
		{deltaChunk(0, " and tests"), 0}, // "s" may begin the key: held
		{pingChunk, 0},                   // the lane has not gone on
		{deltaChunk(0, "!"), 3},          // it went on: not the key
		{deltaChunk(0, "sk-ant-"), 0},
		{deltaChunk(0, "api"), 0},
		{deltaChunk(0, "x"), 3},
	}
	for i, st := range steps {
		got, err := s.Next(st.chunk, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != st.released {
			t.Fatalf("step %d: %d chunks released, want %d", i, len(got), st.released)
		}
		if st.released == 1 && !bytes.Equal(got[0], st.chunk) {
			t.Fatalf("step %d: released %s, want the chunk as it came", i, got[0])
		}
	}
	if rest, err := s.End(); err != nil || len(rest) != 0 {
		t.Fatalf("%d chunks left at the end", len(rest))
	}
}

// TestAClosedLaneReleasesItsHeadAndCutsTheTailIfItGoesOn: a chunk that closes the lanes releases a
// held head at once; should the lane still go on to complete the key, the rest is cut and the token
// written in its place, so the agent never assembles the key.
func TestAClosedLaneReleasesItsHeadAndCutsTheTailIfItGoesOn(t *testing.T) {
	w := NewWithholder(withheldKey1)
	s := w.Stream()
	head, tail := withheldKey1[:20], withheldKey1[20:]
	stop := []byte(`{"event":"content_block_stop","data":{"type":"content_block_stop","index":0}}`)
	var out [][]byte
	for i, c := range [][]byte{deltaChunk(0, "x "+head), stop, deltaChunk(0, tail+" y")} {
		got, err := s.Next(c, i == 1)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 && len(got) != 2 {
			t.Fatalf("the closing chunk released %d chunks, want 2", len(got))
		}
		out = append(out, got...)
	}
	rest, err := s.End()
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, rest...)
	got := assembledText(t, out, 0)
	if strings.Contains(got, withheldKey1) || strings.Contains(got, tail) {
		t.Fatalf("assembled %q: the key's tail reached the agent", got)
	}
	if want := "x " + head + Token(withheldKey1) + " y"; got != want {
		t.Fatalf("assembled %q, want %q", got, want)
	}
}

// TestWithheldFormsAreWithheldToo: the key as JSON escapes spell it, base64-encoded, and
// percent-encoded, split between two deltas, never reaches the agent either.
func TestWithheldFormsAreWithheldToo(t *testing.T) {
	key := `sk-"quoted"/key+with=chars`
	w := NewWithholder(key)
	for _, form := range []string{key, base64.StdEncoding.EncodeToString([]byte(key)), "sk-%22quoted%22%2Fkey%2Bwith%3Dchars"} {
		for cut := 1; cut < len(form); cut++ {
			out := runWithheld(t, w, [][]byte{deltaChunk(0, "a "+form[:cut]), deltaChunk(0, form[cut:]+" b")}, nil)
			got := assembledText(t, out, 0)
			if strings.Contains(got, form) || !strings.Contains(got, TokenPrefix) {
				t.Fatalf("form %q cut at %d: assembled %q", form, cut, got)
			}
		}
	}
}

// TestASecretAcrossTwoLanesEndsTheStream: a lane ending with the key's head and another starting with
// its tail cannot be rewritten lane by lane: the stream must end there.
func TestASecretAcrossTwoLanesEndsTheStream(t *testing.T) {
	w := NewWithholder(withheldKey1)
	s := w.Stream()
	if _, err := s.Next(deltaChunk(0, "a "+withheldKey1[:10]), false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(deltaChunk(1, withheldKey1[10:]), false); !errors.Is(err, ErrStreamExposed) {
		t.Fatalf("err = %v, want ErrStreamExposed", err)
	}
}

// TestAWithheldStreamHoldsABoundedWindow: a lane that keeps ending with the key's head while nothing
// settles it holds no more than the bound; the chunks past it are released in order.
func TestAWithheldStreamHoldsABoundedWindow(t *testing.T) {
	w := NewWithholder(withheldKey1)
	s := w.Stream()
	if _, err := s.Next(deltaChunk(0, "sk"), false); err != nil {
		t.Fatal(err)
	}
	released := 0
	for i := 0; i < 3*maxHeldChunks; i++ {
		got, err := s.Next(pingChunk, false)
		if err != nil {
			t.Fatal(err)
		}
		released += len(got)
		if held := i + 2 - released; held > maxHeldChunks+1 {
			t.Fatalf("%d chunks held", held)
		}
	}
	if released == 0 {
		t.Fatal("nothing was released")
	}
}

// TestWithholderDocument: a JSON error body quoting the key (plainly, and with JSON escapes) is
// answered with the token in its place and stays JSON; a body without the key is returned byte for
// byte; text is rewritten as text.
func TestWithholderDocument(t *testing.T) {
	w := NewWithholder(withheldKey1)
	escaped := strings.ReplaceAll(withheldKey1, "s", `\u0073`)
	for _, tc := range []struct{ in, want string }{
		{`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + withheldKey1 + `"}}`,
			`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + Token(withheldKey1) + `"}}`},
		{`{ "error": { "message": "key ` + escaped + `" } }`, `{"error":{"message":"key ` + Token(withheldKey1) + `"}}`},
		{`{ "spaced" : "no key here" }`, `{ "spaced" : "no key here" }`},
		{"<html>bad key " + withheldKey1 + "</html>", "<html>bad key " + Token(withheldKey1) + "</html>"},
		{"", ""},
	} {
		if diff := cmp.Diff(tc.want, string(w.Document([]byte(tc.in)))); diff != "" {
			t.Errorf("Document(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
	if got := NewWithholder().Document([]byte(tc0)); string(got) != tc0 {
		t.Errorf("an empty withholder changed %q to %q", tc0, got)
	}
}

const tc0 = `{"message":"` + withheldKey1 + `"}`

// TestTheVaultKeepsTheWithheldMark: a withheld secret that was redacted is marked in the vault, which
// a replay reads back; one never redacted leaves no mark (and no secret) in it, and the mark is no
// token that Restore would put back.
func TestTheVaultKeepsTheWithheldMark(t *testing.T) {
	r := New(nil)
	other := "sk-other-never-seen-0123456789"
	for _, k := range []string{withheldKey1, other} {
		r.AddLiteral("declared-secret", k)
		r.MarkWithheld(k)
	}
	if out := r.String("echo " + base64.StdEncoding.EncodeToString([]byte(withheldKey1))); strings.Contains(out, withheldKey1) {
		t.Fatal(out)
	}
	v := NewVault()
	if err := v.Merge(r.Secrets()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{withheldKey1}, v.Withheld()); diff != "" {
		t.Fatalf("withheld (-want +got):\n%s", diff)
	}
	mark := withheldKey(withheldKey1)
	if got := v.Restore("x " + mark + " y"); got != "x "+mark+" y" {
		t.Fatalf("Restore rewrote the mark: %q", got)
	}
}

// BenchmarkWithheldStream reports what withholding costs a streamed answer that holds no secret: a
// thousand text deltas of a few words, as an SDK's stream carries them; "plain" ends no delta with
// the head of the key, "heads" ends every one with it (an "s"), so that each is held for the next.
func BenchmarkWithheldStream(b *testing.B) {
	for _, tc := range []struct{ name, tail string }{{"plain", " word"}, {"heads", " tests"}} {
		b.Run(tc.name, func(b *testing.B) {
			w := NewWithholder(withheldKey1)
			chunks := make([][]byte, 1000)
			for i := range chunks {
				chunks[i] = deltaChunk(0, fmt.Sprintf(" %d%s", i, tc.tail))
			}
			b.ResetTimer()
			for range b.N {
				s := w.Stream()
				for _, c := range chunks {
					if _, err := s.Next(c, false); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := s.End(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(chunks)), "ns/chunk")
		})
	}
}

// TestWithheldStreamsOfRandomSplitsAssembleToTheRedactedText: texts made of the key, heads of it and
// other words, cut into deltas at random and interleaved with pings and another block's deltas,
// always release every chunk in order and assemble to the text with each key replaced by its token.
// With closing events thrown in at random too (a lane that goes on after it was closed), a head of
// the key may have gone out before the token, but the key itself never reaches the agent.
func TestWithheldStreamsOfRandomSplitsAssembleToTheRedactedText(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 13))
	w := NewWithholder(withheldKey1)
	words := []string{withheldKey1, withheldKey1[:1], withheldKey1[:7], withheldKey1[:30], "tests ", " ", "s", "k-ant", withheldKey1[5:]}
	stop := []byte(`{"event":"content_block_stop","data":{"type":"content_block_stop","index":1}}`)
	for trial := 0; trial < 4000; trial++ {
		closing := trial%2 == 1
		var text strings.Builder
		for n := 1 + rng.IntN(6); n > 0; n-- {
			text.WriteString(words[rng.IntN(len(words))])
		}
		whole := text.String()
		var chunks [][]byte
		closes := map[int]bool{}
		for rest := whole; rest != ""; {
			n := 1 + rng.IntN(len(rest))
			chunks = append(chunks, deltaChunk(0, rest[:n]))
			rest = rest[n:]
			pick := rng.IntN(4)
			if pick == 2 && !closing {
				pick = 3
			}
			switch pick {
			case 0:
				chunks = append(chunks, pingChunk)
			case 1:
				chunks = append(chunks, deltaChunk(1, "zz"))
			case 2:
				closes[len(chunks)] = true // a closing event of another block releases what is held
				chunks = append(chunks, stop)
			}
		}
		out := runWithheld(t, w, chunks, closes)
		if len(out) != len(chunks) {
			t.Fatalf("%q: %d chunks released of %d", whole, len(out), len(chunks))
		}
		got := assembledText(t, out, 0)
		if want := strings.ReplaceAll(whole, withheldKey1, Token(withheldKey1)); got != want && !closing {
			t.Fatalf("%q cut as %s: assembled %q, want %q", whole, bytes.Join(chunks, []byte("\n")), got, want)
		}
		if strings.Contains(got, withheldKey1) {
			t.Fatalf("%q: the key reached the agent: %q", whole, got)
		}
	}
}
