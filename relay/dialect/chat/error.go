package chat

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/relaydev/relay/relay/wire"
)

// Error is the error object of the OpenAI API, as sent in a non-2xx
// body or, by some providers, as a chunk in the middle of a stream.
//
// Providers that claim compatibility disagree on types: code is a string at
// OpenAI and a number at vLLM, param and message are sometimes objects. The
// decoder therefore keeps every field as text (JSON text for non-strings)
// instead of failing, because an error that cannot be decoded hides the real
// one.
type Error struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param"`
	Code    string `json:"code"`
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = "provider error"
	}
	if e.Type != "" {
		msg += " (type " + e.Type + ")"
	}
	if e.Code != "" {
		msg += " (code " + e.Code + ")"
	}
	return msg
}

// ErrorOf is the error object that tells a client of e.
func ErrorOf(e *wire.Error) Error {
	return Error{Message: e.Message, Type: e.Type, Param: e.Param, Code: e.Code}
}

// MarshalJSON writes the object as OpenAI does: param and code are null
// rather than absent when unset.
func (e Error) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}{e.Message, e.Type, nonEmpty(e.Param), nonEmpty(e.Code)})
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// UnmarshalJSON accepts an error object with loosely typed fields, or a bare
// string, which some providers send as {"error": "message"}.
func (e *Error) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*e = Error{Message: s}
		return nil
	}
	var raw struct {
		Message, Type, Param, Code json.RawMessage
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("error object: %w", err)
	}
	*e = Error{
		Message: jsonText(raw.Message),
		Type:    jsonText(raw.Type),
		Param:   jsonText(raw.Param),
		Code:    jsonText(raw.Code),
	}
	return nil
}

// jsonText returns a JSON string's value, "" for null or absent, and the
// compact JSON text of anything else.
func jsonText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// ParseErrorBody recognises the error shapes of OpenAI-compatible servers:
// {"error": {...}} or {"error": "..."} (OpenAI and most others) and a
// top-level {"object": "error", "message": ...} (vLLM).
func ParseErrorBody(b []byte) (Error, bool) {
	var env struct {
		Error  *Error `json:"error"`
		Object string `json:"object"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return Error{}, false
	}
	if env.Error != nil {
		return *env.Error, true
	}
	if env.Object == "error" {
		var e Error
		if err := json.Unmarshal(b, &e); err == nil {
			return e, true
		}
	}
	return Error{}, false
}
