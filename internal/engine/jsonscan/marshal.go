package jsonscan

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// InvalidUTF8Error names a string in a Go value that is not valid UTF-8: encoding/json would replace
// its bad bytes with U+FFFD, so what is recorded would not be what was given.
type InvalidUTF8Error struct {
	Path   string // where in the value: .field, [index], ["map key"]; empty for the value itself
	Offset int    // the byte offset of the first invalid byte in that string
}

func (e *InvalidUTF8Error) Error() string {
	at := "the value"
	if e.Path != "" {
		at = e.Path
	}
	return fmt.Sprintf("%s holds a string that is not valid UTF-8 (byte %d of it): give text as UTF-8, or bytes as []byte, which is encoded as base64", at, e.Offset)
}

// escapedFFFD is what json.Marshal writes for every byte it repairs; it writes a U+FFFD that was in
// the string as the character itself, so without this escape nothing was repaired.
var escapedFFFD = []byte(`\ufffd`)

// Marshal is json.Marshal, byte for byte, except that a value holding a string json.Marshal would
// repair (one that is not valid UTF-8) is refused with an *InvalidUTF8Error. The check costs a scan
// of the output: every repair writes the escape \ufffd (a U+FFFD in the string is written as the
// character), so the value is walked only when the output holds that escape, which raw JSON inside
// the value may hold too. A json.Marshaler's output is copied as it is, never repaired: invalid
// UTF-8 in it is left for the caller's check of the output.
func Marshal(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(data, escapedFFFD) {
		return data, nil
	}
	if err := CheckUTF8(v); err != nil {
		return nil, err
	}
	return data, nil
}

// CheckUTF8 walks v as encoding/json would encode it and returns an *InvalidUTF8Error for the first
// string it would repair: a string value, a map key or a TextMarshaler's text that is not valid
// UTF-8. It walks exported and embedded fields not tagged "-", map keys and values, and elements;
// []byte is base64 and a json.Marshaler's output is not repaired, so neither is looked into. A
// pointer, map or slice already walked is not walked again, and one met again on the current path is
// a cycle, which json.Marshal refuses.
func CheckUTF8(v any) error {
	c := utf8Check{done: map[visit]bool{}, onPath: map[visit]bool{}}
	return c.value(reflect.ValueOf(v), "", 0)
}

type utf8Check struct {
	done, onPath map[visit]bool
}

// visit identifies a reference: its address, its type (a struct and its first field share an address)
// and, for a slice, its length (two slices of one array may see different elements).
type visit struct {
	ptr uintptr
	typ reflect.Type
	n   int
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func (c *utf8Check) value(v reflect.Value, path string, depth int) error {
	if !v.IsValid() || depth > maxDepth {
		return nil
	}
	t := v.Type()
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		if v.IsNil() {
			return nil
		}
	}
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Map || (t.Kind() == reflect.Slice && v.Len() > 0) {
		ref := visit{ptr: v.Pointer(), typ: t}
		if t.Kind() == reflect.Slice {
			ref.n = v.Len()
		}
		if c.done[ref] || c.onPath[ref] {
			return nil
		}
		c.onPath[ref] = true
		err := c.walk(v, path, depth)
		delete(c.onPath, ref)
		c.done[ref] = err == nil
		return err
	}
	return c.walk(v, path, depth)
}

func (c *utf8Check) walk(v reflect.Value, path string, depth int) error {
	// A value reached through an unexported embedded struct cannot be called; its strings are still read.
	if v.CanInterface() {
		if _, ok := methodValue(v, marshalerType); ok {
			return nil
		}
		if m, ok := methodValue(v, textMarshalerType); ok {
			out, err := m.Interface().(encoding.TextMarshaler).MarshalText()
			if err != nil {
				return nil // json.Marshal reports it
			}
			return checkBytes(out, path)
		}
	}
	switch v.Kind() {
	case reflect.String:
		return checkBytes([]byte(v.String()), path)
	case reflect.Pointer, reflect.Interface:
		return c.value(v.Elem(), path, depth+1)
	case reflect.Struct:
		return c.fields(v, path, depth)
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			k := it.Key()
			kp := path + "[" + strconv.Quote(keyText(k)) + "]"
			// A key of a string kind is written as it is, even when it has a MarshalText.
			if k.Kind() == reflect.String {
				if err := checkBytes([]byte(k.String()), kp); err != nil {
					return err
				}
			} else if err := c.value(k, kp, depth+1); err != nil {
				return err
			}
			if err := c.value(it.Value(), kp, depth+1); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // base64
		}
		for i := range v.Len() {
			if err := c.value(v.Index(i), path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// methodValue returns v (or its address, as encoding/json takes it when it can) when it implements t.
func methodValue(v reflect.Value, t reflect.Type) (reflect.Value, bool) {
	if v.Kind() != reflect.Interface && v.Type().Implements(t) {
		return v, true
	}
	if v.Kind() != reflect.Pointer && v.CanAddr() && reflect.PointerTo(v.Type()).Implements(t) {
		return v.Addr(), true
	}
	return reflect.Value{}, false
}

// fields walks the fields encoding/json encodes: exported ones and embedded structs, without the
// ones tagged "-". A path names a field by its JSON name.
func (c *utf8Check) fields(v reflect.Value, path string, depth int) error {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if (!sf.IsExported() && !sf.Anonymous) || sf.Tag.Get("json") == "-" {
			continue
		}
		fp := path
		if !sf.Anonymous {
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			fp = path + "." + cmp.Or(name, sf.Name)
		}
		if err := c.value(v.Field(i), fp, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// keyText is a map key as a path shows it.
func keyText(k reflect.Value) string {
	switch {
	case k.Kind() == reflect.String:
		return k.String()
	case k.CanInterface():
		if m, ok := k.Interface().(encoding.TextMarshaler); ok {
			if text, err := m.MarshalText(); err == nil {
				return string(text)
			}
		}
		return fmt.Sprint(k.Interface())
	}
	return "?"
}

// checkBytes refuses text that is not valid UTF-8, naming the first bad byte.
func checkBytes(b []byte, path string) error {
	if utf8.Valid(b) {
		return nil
	}
	off := 0
	for off < len(b) {
		r, size := utf8.DecodeRune(b[off:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		off += size
	}
	return &InvalidUTF8Error{Path: path, Offset: off}
}
