package mcpproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxFrameBytes is the largest JSON-RPC frame relayed over stdio; a longer line is refused whole.
const MaxFrameBytes = 16 << 20

// errFrameTooLong is a line longer than MaxFrameBytes; it was skipped up to its newline.
var errFrameTooLong = fmt.Errorf("the frame is longer than %d bytes, the most agentrewind relays", MaxFrameBytes)

// frameReader reads newline-delimited frames, counting bytes so that errors can say where they are.
type frameReader struct {
	r      *bufio.Reader
	offset int64 // bytes read before the current frame
}

func newFrameReader(r io.Reader) *frameReader { return &frameReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the next non-blank frame and the stream offset it starts at. A frame longer than
// MaxFrameBytes is skipped and reported as errFrameTooLong; io.EOF ends the stream (a last frame
// without its newline is still returned).
func (f *frameReader) next() ([]byte, int64, error) {
	for {
		start := f.offset
		var line []byte
		tooLong := false
		for {
			chunk, err := f.r.ReadSlice('\n')
			f.offset += int64(len(chunk))
			if !tooLong {
				if len(line)+len(chunk) > MaxFrameBytes+1 {
					tooLong, line = true, nil
				} else {
					line = append(line, chunk...)
				}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil && (tooLong || len(bytes.TrimSpace(line)) == 0) {
				return nil, start, err
			}
			break
		}
		if tooLong {
			return nil, start, errFrameTooLong
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), start, nil
	}
}
