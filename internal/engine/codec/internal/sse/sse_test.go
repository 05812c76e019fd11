package sse

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSplitsEventsAsTheSDKsDo(t *testing.T) {
	body := []byte(": comment\r\nevent: a\r\ndata: {\"x\":1}\r\ndata: 2\r\n\r\nid: 7\ndata:\n\nevent: b\n\n")
	want := map[bool][]Event{
		// The Anthropic SDK skips an event whose data lines are all empty; the OpenAI SDK dispatches it.
		false: {{Name: "a", Data: []byte("{\"x\":1}\n2"), Offset: 0}, {Name: "b", Offset: 60}},
		true:  {{Name: "a", Data: []byte("{\"x\":1}\n2"), Offset: 0}, {Data: []byte{}, Offset: 47}, {Name: "b", Offset: 60}},
	}
	for keep, w := range want {
		got, err := Parse(body, keep)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(w, got); d != "" {
			t.Errorf("keepEmptyData %v (-want +got):\n%s", keep, d)
		}
	}
	_, err := Parse([]byte("event: a\ndata: 1\n\nevent: b\ndata: 2\n"), false)
	var cut *TruncatedError
	if !errors.As(err, &cut) || cut.Offset != 18 {
		t.Fatalf("a body ending inside an event: %v, want a TruncatedError at byte 18", err)
	}
}
