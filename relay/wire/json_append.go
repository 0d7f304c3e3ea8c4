package wire

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// The appenders below write JSON values exactly as encoding/json's Marshal
// does, HTML escaping included, so that what the relay renders by hand (a
// frame here, a chat chunk in relay/dialect/chat) is byte for byte what
// encoding/json renders; FuzzFrameEncode, and the chat dialect's
// FuzzRenderChunk, hold them to it.

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string (AppendJSONChars).
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	b = AppendJSONChars(b, s)
	return append(b, '"')
}

// AppendJSONChars appends s escaped for a JSON string: '"' and '\\' with a
// backslash; \b, \f, \n, \r and \t by name; other control bytes and the
// HTML-sensitive '<', '>' and '&' as \u00XX; U+2028 and U+2029 as \u202X
// (JavaScript reads them as line ends); each byte of invalid UTF-8 as
// \ufffd.
func AppendJSONChars(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}

// AppendJSONFloat appends f as encoding/json renders a float64: the
// shortest decimal that reads back as f, in exponent form below 1e-6 and
// from 1e21 on, with the exponent unpadded (1e-7, not 1e-07). ok is false
// for NaN and the infinities, which JSON cannot hold.
func AppendJSONFloat(b []byte, f float64) (_ []byte, ok bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, true
}
