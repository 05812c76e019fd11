package openai

import (
	"errors"

	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/codecerr"
	"github.com/agentrewind/agentrewind/internal/engine/codec/internal/jsonobj"
)

// codecName names this codec in its errors.
const codecName = "openai"

// CodecError reports input the codec cannot map: Field is the JSON path of the offending member (for
// a stream, relative to the offending event's data, e.g. "choices[0].delta.tool_calls[1].index"), Offset the byte offset into
// the input. Err matches one of the Err* values below with errors.Is.
type CodecError = codecerr.Error

// What the codec refuses; all but the last are every codec's.
var (
	ErrNotJSON      = codecerr.ErrNotJSON
	ErrMissing      = codecerr.ErrMissing
	ErrWrongType    = codecerr.ErrWrongType
	ErrUnknownField = codecerr.ErrUnknownField
	ErrReserved     = codecerr.ErrReserved
	ErrTruncated    = codecerr.ErrTruncated
	// ErrIndex: a stream chunk addresses a choice or a tool call by a negative index.
	ErrIndex = errors.New("choice or tool call index out of range")
)

// fieldError is a CodecError about a member, with no byte offset.
func fieldError(op, field string, err error) *CodecError {
	return codecerr.Field(codecName, op, field, err)
}

// syntaxError is a CodecError at the first byte that makes a body invalid JSON.
func syntaxError(op string, err error) *CodecError { return codecerr.Syntax(codecName, op, err) }

// checkJSON validates a whole body, so later decoding can assume well-formed input.
func checkJSON(op string, body []byte) error { return codecerr.CheckJSON(codecName, op, body) }

// parseBody validates a body and reads it as an object.
func parseBody(op string, body []byte) (*jsonobj.Object, error) {
	return codecerr.ParseBody(codecName, op, body)
}

func firstByte(b []byte) int64 { return codecerr.FirstByte(b) }
