package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// Field is a JSON member the relay does not interpret, kept as the provider
// sent it so that it can be re-emitted unchanged.
type Field struct {
	Name  string
	Value json.RawMessage
}

// errNotObject is what the member scanner says of data that is not a JSON
// object.
var errNotObject = errors.New("not a JSON object")

// members calls fn with the raw name (quotes and escapes included) and the
// raw value of each member of the JSON object obj, in order, and returns
// fn's first error. obj must have been validated as JSON, as json.Unmarshal
// does with a json.RawMessage: the scan only tracks strings and nesting,
// which is why a chunk costs one pass of the decoder, not one per level.
func members(obj []byte, fn func(name, value []byte) error) error {
	obj = bytes.TrimSpace(obj)
	if len(obj) < 2 || obj[0] != '{' {
		return errNotObject
	}
	return elements(obj[1:len(obj)-1], func(member []byte) error {
		end := stringEnd(member)
		name := member[:end]
		value := bytes.TrimSpace(member[end:])
		return fn(name, bytes.TrimSpace(value[1:])) // after the colon
	})
}

// arrayElements calls fn with each raw element of the JSON array arr.
func arrayElements(arr []byte, fn func(elem []byte) error) error {
	arr = bytes.TrimSpace(arr)
	if len(arr) < 2 || arr[0] != '[' {
		return errors.New("not a JSON array")
	}
	return elements(arr[1:len(arr)-1], func(e []byte) error { return fn(bytes.TrimSpace(e)) })
}

// elements splits the inside of a valid JSON object or array at its
// top-level commas.
func elements(in []byte, fn func(elem []byte) error) error {
	in = bytes.TrimSpace(in)
	if len(in) == 0 {
		return nil
	}
	depth, start := 0, 0
	for i := 0; i < len(in); i++ {
		switch in[i] {
		case '"':
			i += stringEnd(in[i:]) - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			if depth == 0 {
				if err := fn(bytes.TrimSpace(in[start:i])); err != nil {
					return err
				}
				start = i + 1
			}
		}
	}
	return fn(bytes.TrimSpace(in[start:]))
}

// stringEnd returns the length of the JSON string at the start of s,
// quotes included.
func stringEnd(s []byte) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(s)
}

// isNull reports whether a raw value is absent or JSON null.
func isNull(raw []byte) bool { return len(raw) == 0 || string(raw) == "null" }

// decodeString decodes a raw JSON string; null yields "".
func decodeString(raw []byte) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	if len(raw) >= 2 && raw[0] == '"' {
		if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			// No escape and valid UTF-8: the common token needs no
			// decoder (which would replace invalid sequences).
			return string(inner), nil
		}
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// field keeps an unknown member: its name decoded, its value copied out of
// the event's buffer.
func field(name, value []byte) (Field, error) {
	n, err := decodeString(name)
	return Field{Name: n, Value: bytes.Clone(value)}, err
}
