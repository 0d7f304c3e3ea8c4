package chat

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/relaydev/relay/relay/jsonscan"
	"github.com/relaydev/relay/relay/wire"
)

// ParamStyle is how a dialect names a parameter inside a request.
type ParamStyle int

const (
	// Indexed names are OpenAI's: messages[2].content.
	Indexed ParamStyle = iota
	// Dotted names are Anthropic's: messages.2.content.
	Dotted
)

// CheckText refuses a body whose text is not what encoding/json reads
// (jsonscan.ValidText): bytes that are not UTF-8, or a surrogate escape
// not in a pair. Every check of a request decodes it, and decoding turns
// both into U+FFFD, so they are looked for in the bytes, which are what a
// provider gets. The error names the string that holds them, in style.
// body is JSON that encoding/json accepted.
func CheckText(body []byte, style ParamStyle) *wire.Error {
	if jsonscan.ValidText(body) {
		return nil
	}
	param, key, raw := badText(body, style)
	what := param
	if key {
		what = "a member name in " + orElse(param, "the request body")
	}
	format := "%s must be valid UTF-8 text, but holds %s"
	if style == Dotted {
		format = "%s: must be valid UTF-8 text, but holds %s"
	}
	fault := "an unpaired surrogate escape (\\uD800 to \\uDFFF)"
	if !utf8.Valid(raw) {
		fault = "bytes that are not UTF-8"
	}
	return Invalid(param, CodeInvalidValue, format, what, fault)
}

// orElse is s, or otherwise if s is empty.
func orElse(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// textFrame is an object or an array badText is in.
type textFrame struct {
	object bool
	atKey  bool   // object: a member's name comes next
	key    string // object: the member whose value comes next
	index  int    // array: the element that comes next
}

// badText names the first string of body that ValidText refuses, says
// whether it is a member's name (then param names the object), and
// returns its bytes. It reads body's tokens with encoding/json, which
// follows any depth and any escape, and each string's bytes from the
// decoder's offsets.
func badText(body []byte, style ParamStyle) (param string, key bool, raw []byte) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []textFrame
	var prev int64
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false, body
		}
		raw = body[prev:dec.InputOffset()]
		prev = dec.InputOffset()
		var top *textFrame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		s, isString := tok.(string)
		if top != nil && top.object && top.atKey && isString {
			if !jsonscan.ValidText(raw) {
				return paramOf(stack[:len(stack)-1], style), true, raw
			}
			top.key, top.atKey = s, false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, textFrame{object: tok == json.Delim('{'), atKey: true})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return "", false, body
			}
			top = &stack[len(stack)-1]
		}
		if isString && !jsonscan.ValidText(raw) {
			return paramOf(stack, style), false, raw
		}
		if top != nil { // a value read: a member's name or an element comes next
			top.atKey = true
			top.index++
		}
	}
}

// paramOf names the value the innermost of stack is at.
func paramOf(stack []textFrame, style ParamStyle) string {
	var b strings.Builder
	for _, f := range stack {
		switch {
		case f.object && b.Len() > 0:
			b.WriteString("." + f.key)
		case f.object:
			b.WriteString(f.key)
		case style == Dotted:
			b.WriteString("." + strconv.Itoa(f.index))
		default:
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	return b.String()
}
