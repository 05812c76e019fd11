package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Streams stored once (schema 3). A streamed answer arrives as chunks whose strings, put together, are
// the strings of the assembled response: stored as they are, its text would cost twice, once in the
// chunks and once in the response. The writer cuts from each chunk every string that is the next piece
// of a string of the response's content, leaving "" and a TextSpan in its place; the reader puts the
// piece back. A piece is cut only when putting it back gives the chunk's bytes exactly, so a stream
// whose text is escaped differently from the response is stored as it is.

// TextSpan says that the chunk Chunk of the stored stream holds "" at byte At of its data where the
// recorded chunk had the JSON string of bytes From to To of the Leaf-th string value of the response's
// content.
type TextSpan struct {
	Chunk int `json:"c"`
	At    int `json:"a"`
	Leaf  int `json:"l"`
	From  int `json:"f"`
	To    int `json:"t"`
}

// minSpan is the shortest encoded string worth cutting: a span costs about 30 bytes.
const minSpan = 24

// jsonLeaf is a string value (not a key) of a JSON document: its bytes doc[start:end] and its text.
type jsonLeaf struct {
	start, end int
	text       string
}

// stringLeaves lists the string values of a valid JSON document in document order.
func stringLeaves(doc []byte) []jsonLeaf {
	var out []jsonLeaf
	var stack []byte
	key := false
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '{':
			stack, key = append(stack, '{'), true
		case '[':
			stack, key = append(stack, '['), false
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			key = false
		case ',':
			key = len(stack) > 0 && stack[len(stack)-1] == '{'
		case ':':
			key = false
		case '"':
			j := i + 1
			for j < len(doc) && doc[j] != '"' {
				if doc[j] == '\\' {
					j++
				}
				j++
			}
			j++ // past the closing quote
			if j > len(doc) {
				return out
			}
			if !key {
				var s string
				if json.Unmarshal(doc[i:j], &s) == nil {
					out = append(out, jsonLeaf{start: i, end: j, text: s})
				}
			}
			key = false
			i = j - 1
		}
	}
	return out
}

// spliceStream returns the stored form of a stream whose response is resp: a new slice of chunks with
// the text the response holds cut out, and the spans that put it back.
func spliceStream(chunks []Chunk, resp *Response) ([]Chunk, []TextSpan, error) {
	if len(chunks) == 0 || resp == nil || len(resp.Content) == 0 {
		return chunks, nil, nil
	}
	content, err := json.Marshal(resp.Content)
	if err != nil {
		return nil, nil, fmt.Errorf("response.content: %w", err)
	}
	src := stringLeaves(content)
	out := make([]Chunk, len(chunks))
	var spans []TextSpan
	leaf, pos := 0, 0
	for ci, ch := range chunks {
		out[ci] = ch
		if ch.Data == nil {
			continue
		}
		data, err := json.Marshal(ch.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("stream[%d].data: %w", ci, err)
		}
		var cut []byte
		last := 0
		for _, lf := range stringLeaves(data) {
			enc := data[lf.start:lf.end]
			if len(enc) < minSpan {
				continue
			}
			l, p, ok := nextPiece(src, leaf, pos, lf.text)
			if !ok {
				continue
			}
			if again, err := json.Marshal(lf.text); err != nil || !bytes.Equal(again, enc) {
				continue
			}
			cut = append(cut, data[last:lf.start]...)
			spans = append(spans, TextSpan{Chunk: ci, At: len(cut), Leaf: l, From: p, To: p + len(lf.text)})
			cut = append(cut, '"', '"')
			last = lf.end
			leaf, pos = l, p+len(lf.text)
		}
		if cut != nil {
			out[ci].Data = append(cut, data[last:]...)
		}
	}
	if spans == nil {
		return chunks, nil, nil
	}
	return out, spans, nil
}

// nextPiece finds text at the cursor (leaf, pos) of the response's strings, or at the start of a
// later one.
func nextPiece(src []jsonLeaf, leaf, pos int, text string) (int, int, bool) {
	for l := leaf; l < len(src); l++ {
		p := 0
		if l == leaf {
			p = pos
		}
		if strings.HasPrefix(src[l].text[p:], text) {
			return l, p, true
		}
	}
	return 0, 0, false
}

// unsplice puts back the text the writer cut from ev's stream.
func (x *Expander) unsplice(ev *Event) error {
	if len(ev.StreamText) == 0 {
		return nil
	}
	fail := func(i int, format string, args ...any) error {
		return &RefError{Step: ev.Step, Field: fmt.Sprintf("streamText[%d]", i), Err: fmt.Errorf(format, args...)}
	}
	if ev.Response == nil {
		return fail(0, "the event has no response to take the text from")
	}
	src := stringLeaves(ev.Response.Content)
	stream := make([]Chunk, len(ev.Stream))
	copy(stream, ev.Stream)
	// Spans are in chunk and byte order; putting them back from the last keeps every At valid.
	for i := len(ev.StreamText) - 1; i >= 0; i-- {
		s := ev.StreamText[i]
		if i > 0 {
			if p := ev.StreamText[i-1]; p.Chunk > s.Chunk || p.Chunk == s.Chunk && p.At+2 > s.At {
				return fail(i, "spans out of order")
			}
		}
		if s.Chunk < 0 || s.Chunk >= len(stream) {
			return fail(i, "chunk %d is not in the stream (%d chunks)", s.Chunk, len(stream))
		}
		if s.Leaf < 0 || s.Leaf >= len(src) || s.From < 0 || s.From > s.To || s.To > len(src[s.Leaf].text) {
			return fail(i, "leaf %d bytes %d to %d are not in the response's content", s.Leaf, s.From, s.To)
		}
		data := stream[s.Chunk].Data
		if s.At < 0 || s.At+2 > len(data) || data[s.At] != '"' || data[s.At+1] != '"' {
			return fail(i, "chunk %d has no empty string at byte %d", s.Chunk, s.At)
		}
		piece := src[s.Leaf].text[s.From:s.To]
		if !utf8.ValidString(piece) {
			// The response's text is valid UTF-8, so the span cuts a character: json.Marshal would put
			// back U+FFFD, not the text the chunk carried.
			return fail(i, "bytes %d to %d of leaf %d cut a character in two", s.From, s.To, s.Leaf)
		}
		enc, err := json.Marshal(piece)
		if err != nil {
			return fail(i, "%v", err)
		}
		joined := make([]byte, 0, len(data)+len(enc)-2)
		joined = append(append(append(joined, data[:s.At]...), enc...), data[s.At+2:]...)
		stream[s.Chunk].Data = joined
	}
	ev.Stream = stream
	return nil
}
