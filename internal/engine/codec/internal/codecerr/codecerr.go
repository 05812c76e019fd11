package codecerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
	"github.com/agentrewind/agentrewind/internal/engine/jsonscan"
)

// Error reports input a codec cannot map. It names where the problem is: Field is the JSON path of
// the offending member, Offset the byte offset into the input, and either may be all there is. Err
// says what was wrong and matches one of the Err* values below with errors.Is.
type Error struct {
	// Codec names the codec, e.g. "anthropic".
	Codec string
	// Op is the codec method that failed, e.g. "NormalizeRequest".
	Op string
	// Field is the path of the offending member, e.g. "messages[2].role" or "params.tools". For a
	// stream it is relative to the offending event's data. Empty when the input as a whole is at
	// fault.
	Field string
	// Offset is the byte offset into the input: where a body stops being JSON, or where the offending
	// event of a stream begins. -1 when there are no input bytes to point into (denormalizing) or the
	// field path says it better.
	Offset int64
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Codec != "" {
		b.WriteString(e.Codec + " ")
	}
	b.WriteString("codec: ")
	b.WriteString(e.Op)
	if e.Offset >= 0 {
		fmt.Fprintf(&b, ": byte %d", e.Offset)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// What every codec refuses alike.
var (
	// ErrNotJSON: the body, a stream event's data or a neutral raw value is not valid JSON.
	ErrNotJSON = errors.New("not valid JSON")
	// ErrMissing: a member the wire format requires is absent.
	ErrMissing = errors.New("required member is missing")
	// ErrWrongType: a member has a JSON type the wire format does not allow there.
	ErrWrongType = errors.New("member has the wrong JSON type")
	// ErrUnknownField: a member the neutral form has no place for. It is refused rather than dropped,
	// because a replayed or forked call must send what the agent sent.
	ErrUnknownField = errors.New("member has no place in the neutral form")
	// ErrReserved: Params (or a message's content object) holds a member the neutral request carries
	// in a field of its own.
	ErrReserved = errors.New("member is carried by a field of the neutral request, not by params")
	// ErrTruncated: a stream ends inside an event, before the blank line that completes it.
	ErrTruncated = errors.New("stream ends in the middle of an event")
)

// Field is an Error about a member, with no byte offset.
func Field(codec, op, field string, err error) *Error {
	return &Error{Codec: codec, Op: op, Field: field, Offset: -1, Err: err}
}

// Syntax turns a JSON decoding failure of a whole body into an Error at the first byte that makes the
// body invalid, or at its length when it ends too early. (json.SyntaxError counts the bytes read, the
// offending one included.)
func Syntax(codec, op string, err error) *Error {
	var offset int64
	var se *json.SyntaxError
	if errors.As(err, &se) {
		offset = se.Offset
		if offset > 0 && !strings.HasPrefix(se.Error(), "unexpected end") {
			offset--
		}
	}
	return &Error{Codec: codec, Op: op, Offset: offset, Err: fmt.Errorf("%w: %w", ErrNotJSON, err)}
}

// CheckJSON validates a whole body, so later decoding can assume well-formed input.
func CheckJSON(codec, op string, body []byte) error {
	if jsonscan.Valid(body) {
		return nil
	}
	var v json.RawMessage
	return Syntax(codec, op, json.Unmarshal(body, &v)) // for the decoder's offset and message
}

// ParseBody validates a body and reads it as an object. A body that is valid JSON but not an object
// is reported at its first byte.
func ParseBody(codec, op string, body []byte) (*jsonobj.Object, error) {
	if err := CheckJSON(codec, op, body); err != nil {
		return nil, err
	}
	o, err := jsonobj.ParseValid(body)
	if err != nil {
		return nil, &Error{Codec: codec, Op: op, Offset: FirstByte(body), Err: fmt.Errorf("%w: the body is not a JSON object", ErrWrongType)}
	}
	return o, nil
}

// FirstByte is the offset of the first byte of b that is not JSON white space.
func FirstByte(b []byte) int64 {
	for i, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return int64(i)
		}
	}
	return 0
}
