package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
)

// CurrentSchemaVersion is the event and meta schema this build writes.
//
// Version 1 is the original AgentRewind layout. Version 2 adds the author of each event's bytes
// (accountability) and the ledger kind, and keeps costs as integer micro-dollars instead of a float.
// Version 3 stores each distinct piece of content once (defs, joins, lists, defBlobs, refs: dedup.go) and a
// stream's text once (streamText: streamtext.go); a version 2 line is a version 3 line without them.
const CurrentSchemaVersion = 3

// A migration turns one event at schema version N, as a JSON object, into version N+1. Migrations are
// pure and kept for at least one major version so old recordings stay replayable.
type migration func(obj map[string]json.RawMessage) error

// migrations[n] migrates version n to n+1.
var migrations = map[int]migration{
	1: func(obj map[string]json.RawMessage) error {
		if err := addAuthor(obj); err != nil {
			return err
		}
		return costToMicroUSD(obj)
	},
	2: func(obj map[string]json.RawMessage) error {
		for _, k := range storedFormKeys {
			if _, ok := obj[k]; ok {
				return fmt.Errorf("%s is a schema 3 field", k)
			}
		}
		return nil
	},
}

// storedFormKeys are the event keys schema 3 added.
var storedFormKeys = []string{"defs", "joins", "lists", "defBlobs", "refs", "streamText"}

// addAuthor fills in who authored a v1 event's bytes, from its kind.
func addAuthor(obj map[string]json.RawMessage) error {
	var kind Kind
	if err := json.Unmarshal(obj["kind"], &kind); err != nil {
		return fmt.Errorf("kind: %w", err)
	}
	if _, ok := obj["author"]; !ok {
		a, _ := json.Marshal(DefaultAuthor(kind))
		obj["author"] = a
	}
	return nil
}

var eventType = reflect.TypeFor[Event]()

// decodeEvent decodes one line of events.jsonl, migrating it to the current schema first when it was
// written by an older version, and returns the version it was written at. Lines at the current
// version — nearly all of them — are decoded once.
func decodeEvent(line []byte) (Event, int, error) {
	ev, err := decodeStrict(line)
	if err == nil || json.Valid(line) {
		// encoding/json accepted the text; refuse what it would have silently rewritten.
		if terr := checkJSONText(line, eventType); terr != nil {
			return Event{}, 0, terr
		}
	}
	if err == nil && ev.SchemaVersion == CurrentSchemaVersion {
		return ev, CurrentSchemaVersion, checkKind(ev)
	}
	var head struct {
		SchemaVersion int `json:"schemaVersion"`
	}
	if herr := json.Unmarshal(line, &head); herr != nil {
		return Event{}, 0, herr
	}
	switch {
	case head.SchemaVersion < 1:
		return Event{}, 0, fmt.Errorf("schemaVersion is missing or not a positive integer")
	case head.SchemaVersion > CurrentSchemaVersion:
		return Event{}, 0, &MigrationError{From: head.SchemaVersion, To: CurrentSchemaVersion}
	case head.SchemaVersion == CurrentSchemaVersion:
		return Event{}, 0, err
	}
	migrated, err := migrate(line, head.SchemaVersion)
	if err != nil {
		return Event{}, 0, err
	}
	if ev, err = decodeStrict(migrated); err != nil {
		return Event{}, 0, err
	}
	return ev, head.SchemaVersion, checkKind(ev)
}

// decodeStrict decodes an event, refusing fields the schema does not define: at a known schema version
// an unknown field means a damaged or forged line.
func decodeStrict(line []byte) (Event, error) {
	var ev Event
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return Event{}, err
	}
	if dec.More() {
		return Event{}, fmt.Errorf("unexpected data after the event")
	}
	return ev, nil
}

func checkKind(ev Event) error {
	if !ev.Kind.Known() {
		return fmt.Errorf("unknown event kind %q", ev.Kind)
	}
	return nil
}

func migrate(line []byte, from int) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return nil, err
	}
	for v := from; v < CurrentSchemaVersion; v++ {
		m, ok := migrations[v]
		if !ok {
			return nil, &MigrationError{From: v, To: v + 1, Err: fmt.Errorf("no migration registered")}
		}
		if err := m(obj); err != nil {
			return nil, &MigrationError{From: v, To: v + 1, Err: err}
		}
		obj["schemaVersion"] = json.RawMessage(fmt.Sprint(v + 1))
	}
	return json.Marshal(obj)
}

// costToMicroUSD rewrites v1's floating-point usage.costUsd (on the event and on its response) as
// integer micro-dollars, which add up exactly.
func costToMicroUSD(obj map[string]json.RawMessage) error {
	convert := func(usageRaw json.RawMessage) (json.RawMessage, error) {
		var usage map[string]json.RawMessage
		if err := json.Unmarshal(usageRaw, &usage); err != nil || usage == nil {
			return usageRaw, err
		}
		cost, ok := usage["costUsd"]
		if !ok {
			return usageRaw, nil
		}
		var usd float64
		if err := json.Unmarshal(cost, &usd); err != nil {
			return nil, fmt.Errorf("usage.costUsd: %w", err)
		}
		delete(usage, "costUsd")
		usage["costMicroUSD"] = json.RawMessage(fmt.Sprint(int64(math.Round(usd * 1e6))))
		return json.Marshal(usage)
	}
	if u, ok := obj["usage"]; ok {
		converted, err := convert(u)
		if err != nil {
			return err
		}
		obj["usage"] = converted
	}
	if r, ok := obj["response"]; ok {
		var resp map[string]json.RawMessage
		if err := json.Unmarshal(r, &resp); err != nil {
			return fmt.Errorf("response: %w", err)
		}
		if u, ok := resp["usage"]; ok && resp != nil {
			converted, err := convert(u)
			if err != nil {
				return err
			}
			resp["usage"] = converted
			if obj["response"], err = json.Marshal(resp); err != nil {
				return err
			}
		}
	}
	return nil
}
