package wire

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonScanner reads JSON from s at i, as strictly as encoding/json does:
// each method consumes what it reads and reports true, or reports false
// for anything it does not accept, invalid JSON included, and the caller
// leaves the whole input to encoding/json (so i no longer matters).
type jsonScanner struct {
	s string
	i int
}

// maxRawDepth bounds the nesting of a raw value the scanner skips; deeper
// ones are left to encoding/json (whose own limit is far higher).
const maxRawDepth = 64

// space skips JSON whitespace.
func (p *jsonScanner) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// next consumes c if it comes next.
func (p *jsonScanner) next(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// literal consumes lit (true, false or null) if it comes next.
func (p *jsonScanner) literal(lit string) bool {
	if len(p.s)-p.i >= len(lit) && p.s[p.i:p.i+len(lit)] == lit {
		p.i += len(lit)
		return true
	}
	return false
}

// string consumes a string and returns its value, unquoted as
// encoding/json unquotes it. A string without escapes, of valid UTF-8, is
// a substring of s: no copy.
func (p *jsonScanner) string() (string, bool) {
	body, escaped, ok := p.quoted()
	if !ok {
		return "", false
	}
	if !escaped {
		return body, true
	}
	return unquote(body), true
}

// quoted consumes a string and returns what is between its quotes, and
// whether it has escapes or bytes that are not valid UTF-8 (which unquote
// replaces).
func (p *jsonScanner) quoted() (body string, escaped, ok bool) {
	if !p.next('"') {
		return "", false, false
	}
	start, ascii := p.i, true
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			body = p.s[start:p.i]
			p.i++
			return body, escaped || !ascii && !utf8.ValidString(body), true
		case c == '\\':
			escaped = true
			if !p.escape() {
				return "", false, false
			}
			continue
		case c < 0x20:
			return "", false, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	return "", false, false
}

// escape consumes a valid escape sequence, the backslash included.
func (p *jsonScanner) escape() bool {
	if p.i+1 >= len(p.s) {
		return false
	}
	switch p.s[p.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		p.i += 2
		return true
	case 'u':
		if hex4(p.s[p.i+2:]) < 0 {
			return false
		}
		p.i += 6
		return true
	}
	return false
}

// hex4 returns the value of the 4 hex digits s begins with, -1 if it does
// not.
func hex4(s string) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range []byte(s[:4]) {
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

// unquote returns the value of body, a string's valid escaped contents,
// as encoding/json reads it: each byte of invalid UTF-8 and each unpaired
// surrogate escape becomes U+FFFD.
func unquote(body string) string {
	var b strings.Builder
	b.Grow(len(body))
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\':
			switch e := body[i+1]; e {
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r := hex4(body[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if len(body)-i >= 6 && body[i] == '\\' && body[i+1] == 'u' {
						r2 = hex4(body[i+2:])
					}
					if r = utf16.DecodeRune(r, r2); r != utf8.RuneError {
						i += 6
					}
				}
				b.WriteRune(r)
				continue
			default:
				b.WriteByte(e)
			}
			i += 2
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(body[i:])
			b.WriteRune(r)
			i += size
		}
	}
	return b.String()
}

// number consumes a number and returns its text.
func (p *jsonScanner) number() (string, bool) {
	start := p.i
	p.next('-')
	switch {
	case p.next('0'):
	case p.i < len(p.s) && '1' <= p.s[p.i] && p.s[p.i] <= '9':
		p.digits()
	default:
		return "", false
	}
	if p.next('.') && !p.digits() {
		return "", false
	}
	if p.next('e') || p.next('E') {
		if !p.next('+') {
			p.next('-')
		}
		if !p.digits() {
			return "", false
		}
	}
	return p.s[start:p.i], true
}

// digits consumes decimal digits and reports whether there was one.
func (p *jsonScanner) digits() bool {
	start := p.i
	for p.i < len(p.s) && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// value consumes any JSON value, nested no deeper than maxRawDepth.
func (p *jsonScanner) value(depth int) bool {
	if p.i >= len(p.s) || depth > maxRawDepth {
		return false
	}
	switch c := p.s[p.i]; c {
	case '{':
		return p.object(func(string, bool) bool { return p.value(depth + 1) })
	case '[':
		p.i++
		p.space()
		if p.next(']') {
			return true
		}
		for {
			p.space()
			if !p.value(depth + 1) {
				return false
			}
			p.space()
			if p.next(']') {
				return true
			}
			if !p.next(',') {
				return false
			}
		}
	case '"':
		_, _, ok := p.quoted()
		return ok
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	}
	_, ok := p.number()
	return ok
}

// object consumes an object, calling member with each member's key (and
// whether it has escapes, which key does not undo) with the scanner at the
// member's value, which member consumes.
func (p *jsonScanner) object(member func(key string, escaped bool) bool) bool {
	if !p.next('{') {
		return false
	}
	p.space()
	if p.next('}') {
		return true
	}
	for {
		p.space()
		key, escaped, ok := p.quoted()
		if !ok {
			return false
		}
		p.space()
		if !p.next(':') {
			return false
		}
		p.space()
		if !member(key, escaped) {
			return false
		}
		p.space()
		if p.next('}') {
			return true
		}
		if !p.next(',') {
			return false
		}
	}
}
