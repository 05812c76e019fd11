package session

import (
	"encoding/json"
)

// blobField is an event field that may be stored as a blob, by the name used in Event.Blobs.
type blobField struct {
	name  string
	get   func(*Event) ([]byte, error) // nil bytes when the field is empty
	set   func(*Event, []byte) error
	clear func(*Event)
}

func marshalIfSet[T any](v *T) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

func rawField(get func(*Event) *json.RawMessage) (func(*Event) ([]byte, error), func(*Event, []byte) error, func(*Event)) {
	return func(ev *Event) ([]byte, error) { return *get(ev), nil },
		func(ev *Event, b []byte) error { *get(ev) = json.RawMessage(b); return nil },
		func(ev *Event) { *get(ev) = nil }
}

var blobFields = func() []blobField {
	argsGet, argsSet, argsClear := rawField(func(ev *Event) *json.RawMessage { return &ev.Args })
	resultGet, resultSet, resultClear := rawField(func(ev *Event) *json.RawMessage { return &ev.Result })
	return []blobField{
		{"request", func(ev *Event) ([]byte, error) { return marshalIfSet(ev.Request) },
			func(ev *Event, b []byte) error { ev.Request = &Request{}; return json.Unmarshal(b, ev.Request) },
			func(ev *Event) { ev.Request = nil }},
		{"response", func(ev *Event) ([]byte, error) { return marshalIfSet(ev.Response) },
			func(ev *Event, b []byte) error { ev.Response = &Response{}; return json.Unmarshal(b, ev.Response) },
			func(ev *Event) { ev.Response = nil }},
		{"args", argsGet, argsSet, argsClear},
		{"result", resultGet, resultSet, resultClear},
		{"stream", func(ev *Event) ([]byte, error) {
			if ev.Stream == nil {
				return nil, nil
			}
			return json.Marshal(ev.Stream)
		}, func(ev *Event, b []byte) error { return json.Unmarshal(b, &ev.Stream) },
			func(ev *Event) { ev.Stream = nil }},
	}
}()

func blobFieldByName(name string) (blobField, bool) {
	for _, f := range blobFields {
		if f.name == name {
			return f, true
		}
	}
	return blobField{}, false
}
