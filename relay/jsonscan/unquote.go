package jsonscan

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Unquote writes the text of body, what is between the quotes of a string
// String accepted, as json.Unmarshal decodes it into a string: escapes
// resolved, a surrogate pair joined, and U+FFFD for a lone surrogate and
// for each byte that is not part of valid UTF-8.
func Unquote(w *strings.Builder, body []byte) {
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\':
			// below
		case c < utf8.RuneSelf:
			j := i + 1
			for j < len(body) && body[j] < utf8.RuneSelf && body[j] != '\\' {
				j++
			}
			w.Write(body[i:j])
			i = j
			continue
		default:
			r, size := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && size == 1 {
				w.WriteRune(utf8.RuneError)
			} else {
				w.Write(body[i : i+size])
			}
			i += size
			continue
		}
		switch e := body[i+1]; e {
		case 'u':
			r := Hex4(body[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				r = lowSurrogate(body[i:], r)
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
	return utf16.DecodeRune(r, Hex4(rest[2:]))
}
