package upstream

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// scanChunk decodes the common shape of a chunk (text content, a role, a
// finish_reason, no usage, tool calls or error) in one pass without
// reflection: encoding/json spent 7-10 µs on each (BenchmarkDecodeChunk),
// most of the time a worker spent on a token's parsing. ok is false for
// anything else, also for valid chunks it does not handle (escaped or
// case-folded keys, duplicate keys, non-null usage, tool_calls or error,
// content parts, unusual numbers), and the caller decodes those with
// encoding/json.
//
// It never accepts data that encoding/json rejects nor decodes any
// differently; FuzzScanChunk checks this against decodeChunk.
//
// model is the model of the stream's previous chunk: a chunk naming the
// same one gets that string rather than a copy of its own.
func scanChunk(data []byte, model string) (d Delta, ok bool) {
	s := scanner{b: data}
	var (
		isError bool // "object" is "error"
		choice  scannedChoice
	)
	ok = s.members(func(key []byte) (bit uint8, ok bool) {
		switch string(key) {
		case "model":
			d.Model, ok = s.strOr(model)
			return 1, ok
		case "object":
			isError, ok = s.strIs("error")
			return 2, ok
		case "choices":
			choice, ok = s.choices()
			return 4, ok
		case "usage":
			return 8, s.null()
		case "error":
			return 16, s.null()
		}
		return 0, !foldsTo(key, "model", "object", "choices", "usage", "error") && s.skip(0)
	})
	if s.ws(); !ok || s.i != len(s.b) || isError {
		return Delta{}, false
	}
	d.Role, d.Content, d.FinishReason = choice.role, choice.content, choice.finish
	return d, true
}

// scannedChoice is what scanChunk keeps of a choice.
type scannedChoice struct {
	index                 int
	role, content, finish string
}

// choices scans the choices array and returns the first choice with index
// 0, zero when there is none.
func (s *scanner) choices() (first scannedChoice, ok bool) {
	if s.null() {
		return first, true
	}
	if !s.consume('[') {
		return first, false
	}
	found := false
	for more := !s.consume(']'); more; {
		c, ok := s.choice()
		if !ok {
			return first, false
		}
		if c.index == 0 && !found {
			first, found = c, true
		}
		if more, ok = s.next(']'); !ok {
			return first, false
		}
	}
	return first, true
}

func (s *scanner) choice() (c scannedChoice, ok bool) {
	ok = s.members(func(key []byte) (bit uint8, ok bool) {
		switch string(key) {
		case "index":
			c.index, ok = s.int()
			return 1, ok
		case "delta":
			return 2, s.null() || s.members(func(key []byte) (bit uint8, ok bool) {
				switch string(key) {
				case "role":
					c.role, ok = s.str()
					return 1, ok
				case "content":
					c.content, ok = s.str()
					return 2, ok
				case "tool_calls":
					return 4, s.null()
				}
				return 0, !foldsTo(key, "role", "content", "tool_calls") && s.skip(0)
			})
		case "finish_reason":
			c.finish, ok = s.str()
			return 4, ok
		}
		return 0, !foldsTo(key, "index", "delta", "finish_reason") && s.skip(0)
	})
	return c, ok
}

// members reads an object, calling member with each key and the scanner
// at its value. member reads the value and returns the key's bit, 0 for an
// unknown key: a known key seen twice is left to encoding/json, whose
// merging of duplicates is not worth copying.
func (s *scanner) members(member func(key []byte) (bit uint8, ok bool)) bool {
	if !s.consume('{') {
		return false
	}
	var seen uint8
	for more := !s.consume('}'); more; {
		key, ok := s.key()
		if !ok {
			return false
		}
		bit, ok := member(key)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if more, ok = s.next('}'); !ok {
			return false
		}
	}
	return true
}

// foldsTo reports whether key is not one of names but encoding/json would
// still match it to one, as it matches keys case-insensitively.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if len(key) == len(n) && strings.EqualFold(string(key), n) {
			return true
		}
	}
	return false
}

// scanner reads JSON values from b. Its methods return false on anything
// they do not handle, valid JSON or not.
type scanner struct {
	b []byte
	i int
}

// maxSkipDepth bounds the nesting of skipped values, far below
// encoding/json's limit.
const maxSkipDepth = 64

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// consume skips white space and then c, if c is next.
func (s *scanner) consume(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// next reads what follows a member or element: a comma (more is true) or
// end, the closing bracket.
func (s *scanner) next(end byte) (more, ok bool) {
	if s.consume(',') {
		return true, true
	}
	return false, s.consume(end)
}

// key reads a member's key and its colon. Keys with escapes or non-ASCII
// bytes are not handled: encoding/json matches them after unescaping and
// Unicode case folding.
func (s *scanner) key() ([]byte, bool) {
	if !s.consume('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		c := s.b[s.i]
		if c == '"' {
			key := s.b[start:s.i]
			s.i++
			return key, s.consume(':')
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return nil, false
		}
	}
	return nil, false
}

// literal reads the literal lit if it is next.
func (s *scanner) literal(lit string) bool {
	s.ws()
	if string(s.b[s.i:min(len(s.b), s.i+len(lit))]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

func (s *scanner) null() bool { return s.literal("null") }

// str reads a string or null (""), decoded as encoding/json decodes it.
func (s *scanner) str() (string, bool) { return s.strOr("") }

// strOr is str, returning same rather than a copy when the string is same.
func (s *scanner) strOr(same string) (string, bool) {
	if s.null() {
		return "", true
	}
	start := s.i
	plain, ok := s.skipString()
	if !ok {
		return "", false
	}
	raw := s.b[start:s.i]
	if plain && same != "" && string(raw[1:len(raw)-1]) == same {
		return same, true
	}
	if plain || utf8.Valid(raw) && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	// Escapes, or invalid UTF-8 that encoding/json replaces: rare enough
	// to leave to it, on this one string.
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", false
	}
	return v, true
}

// int reads a non-negative integer without fraction or exponent, or null
// (0).
func (s *scanner) int() (int, bool) {
	if s.null() {
		return 0, true
	}
	start := s.i
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' && s.i-start < 9 {
		n = n*10 + int(s.b[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || (digits > 1 && s.b[start] == '0') || s.i < len(s.b) && isNumberByte(s.b[s.i]) {
		return 0, false
	}
	return n, true
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'
}

// skipString reads a string, checking its escapes as encoding/json does.
// plain reports that it has neither escapes nor non-ASCII bytes.
func (s *scanner) skipString() (plain, ok bool) {
	if !s.consume('"') {
		return false, false
	}
	plain = true
	for s.i < len(s.b) {
		c := s.b[s.i]
		s.i++
		switch {
		case c == '"':
			return plain, true
		case c < 0x20:
			return false, false
		case c >= utf8.RuneSelf:
			plain = false
		case c == '\\':
			plain = false
			if s.i >= len(s.b) {
				return false, false
			}
			e := s.b[s.i]
			s.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if s.i+4 > len(s.b) || !isHex(s.b[s.i]) || !isHex(s.b[s.i+1]) || !isHex(s.b[s.i+2]) || !isHex(s.b[s.i+3]) {
					return false, false
				}
				s.i += 4
			default:
				return false, false
			}
		}
	}
	return false, false
}

// strIs reads a string or null and reports whether it is want, without
// copying it. Strings with escapes or non-ASCII bytes are not handled.
func (s *scanner) strIs(want string) (is, ok bool) {
	if s.null() {
		return false, true
	}
	start := s.i
	plain, ok := s.skipString()
	return ok && string(s.b[start+1:s.i-1]) == want, ok && plain
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skip reads any value, checking it is valid JSON.
func (s *scanner) skip(depth int) bool {
	if depth > maxSkipDepth {
		return false
	}
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, ok := s.skipString()
		return ok
	case c == '{':
		s.i++
		for more := !s.consume('}'); more; {
			var ok bool
			if _, ok = s.skipString(); !ok || !s.consume(':') || !s.skip(depth+1) {
				return false
			}
			if more, ok = s.next('}'); !ok {
				return false
			}
		}
		return true
	case c == '[':
		s.i++
		for more := !s.consume(']'); more; {
			var ok bool
			if !s.skip(depth + 1) {
				return false
			}
			if more, ok = s.next(']'); !ok {
				return false
			}
		}
		return true
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.null()
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

// number reads a number as JSON's grammar has it.
func (s *scanner) number() bool {
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i >= len(s.b):
		return false
	case s.b[s.i] == '0':
		s.i++
	case s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits reads one or more digits.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
