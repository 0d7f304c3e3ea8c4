package upstream

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The functions of this file are the pieces of JSON the chunk fast path
// (chunk_fast.go) reads by hand. Each follows RFC 8259 as encoding/json
// does, and the fuzz tests hold each to the standard library's result: a
// value they accept is one json.Valid accepts, ending where it says, and a
// string decodes to the bytes json.Unmarshal gives. Positions are indexes
// into the data; -1 means "not valid JSON here".

// maxScanDepth bounds the nesting skipValue follows. Chunks nest a handful
// of levels; deeper data is left to encoding/json (which allows 10000).
const maxScanDepth = 64

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace. Unlike bytes.TrimSpace it knows no Unicode spaces.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString returns the index after the JSON string that opens at b[i]
// and whether it holds an escape; -1 if it is not a valid string. Bytes
// that are not UTF-8 are valid, as in encoding/json (which decodes each to
// U+FFFD); control characters are not.
func scanString(b []byte, i int) (end int, escaped bool) {
	if i >= len(b) || b[i] != '"' {
		return -1, false
	}
	for j := i + 1; j < len(b); j++ {
		for j < len(b) && !stringStops[b[j]] {
			j++
		}
		if j == len(b) {
			break
		}
		switch b[j] {
		case '"':
			return j + 1, escaped
		case '\\':
			escaped = true
			j++
			if j >= len(b) {
				return -1, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) || hex4(b[j+1:j+5]) < 0 {
					return -1, false
				}
				j += 4
			default:
				return -1, false
			}
		default: // a control character
			return -1, false
		}
	}
	return -1, false
}

// stringStops marks the bytes that end a run of plain text in a JSON
// string: the quote, the backslash and the control characters.
var stringStops = func() (stops [256]bool) {
	for c := range ' ' {
		stops[c] = true
	}
	stops['"'], stops['\\'] = true, true
	return stops
}()

// hex4 decodes four hex digits, -1 if they are not.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// scanNumber returns the index after the JSON number that starts at b[i],
// -1 if none does. What follows the number is the caller's to check.
func scanNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i = skipDigits(b, i+1); i < 0 {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		i = skipDigits(b, i)
	}
	return i
}

// skipDigits returns the index after the run of digits at b[i], -1 if
// there is none.
func skipDigits(b []byte, i int) int {
	start := i
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	if i == start {
		return -1
	}
	return i
}

// skipValue returns the index after the JSON value that starts at b[i],
// validating it; -1 if it is invalid or nests deeper than maxScanDepth.
func skipValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := scanString(b, i)
		return end
	case '{', '[':
		if depth >= maxScanDepth {
			return -1
		}
		return skipComposite(b, i, depth+1)
	case 't':
		return skipLiteral(b, i, "true")
	case 'f':
		return skipLiteral(b, i, "false")
	case 'n':
		return skipLiteral(b, i, "null")
	}
	return scanNumber(b, i)
}

// skipComposite skips the object or array that opens at b[i].
func skipComposite(b []byte, i, depth int) int {
	closer, object := byte(']'), b[i] == '{'
	if object {
		closer = '}'
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == closer {
		return i + 1
	}
	for {
		if object {
			if i, _ = scanString(b, i); i < 0 {
				return -1
			}
			if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
				return -1
			}
			i = skipSpace(b, i+1)
		}
		if i = skipValue(b, i, depth); i < 0 {
			return -1
		}
		switch i = skipSpace(b, i); {
		case i >= len(b):
			return -1
		case b[i] == closer:
			return i + 1
		case b[i] != ',':
			return -1
		}
		i = skipSpace(b, i+1)
	}
}

// skipLiteral returns the index after lit if b[i:] starts with it.
func skipLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// writeString writes the text of the valid JSON string s (quotes
// included) as json.Unmarshal decodes it into a string: escapes resolved,
// a surrogate pair joined, and U+FFFD for a lone surrogate and for each
// byte that is not part of valid UTF-8.
func writeString(w *strings.Builder, s []byte) {
	s = s[1 : len(s)-1]
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			// below
		case c < utf8.RuneSelf:
			j := i + 1
			for j < len(s) && s[j] < utf8.RuneSelf && s[j] != '\\' {
				j++
			}
			w.Write(s[i:j])
			i = j
			continue
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				w.WriteRune(utf8.RuneError)
			} else {
				w.Write(s[i : i+size])
			}
			i += size
			continue
		}
		switch e := s[i+1]; e {
		case 'u':
			r := hex4(s[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				r = lowSurrogate(s[i:], r)
				if r != utf8.RuneError {
					i += 6
				}
			}
			w.WriteRune(r)
			continue
		case 'b':
			w.WriteByte('\b')
		case 'f':
			w.WriteByte('\f')
		case 'n':
			w.WriteByte('\n')
		case 'r':
			w.WriteByte('\r')
		case 't':
			w.WriteByte('\t')
		default: // '"', '\\' and '/' stand for themselves
			w.WriteByte(e)
		}
		i += 2
	}
}

// lowSurrogate returns the character the surrogate r forms with the \u
// escape at the start of rest, or U+FFFD if it forms none (the escape is
// then read on its own).
func lowSurrogate(rest []byte, r rune) rune {
	if len(rest) < 6 || rest[0] != '\\' || rest[1] != 'u' {
		return utf8.RuneError
	}
	return utf16.DecodeRune(r, hex4(rest[2:]))
}
