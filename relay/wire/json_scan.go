package wire

import (
	"strings"
	"unicode/utf8"

	"github.com/relaydev/relay/relay/jsonscan"
)

// jsonScanner reads JSON from b at i with package jsonscan: each method
// consumes what it reads and reports true, or reports false for anything
// it does not accept, invalid JSON included, and the caller leaves the
// whole input to encoding/json (so i no longer matters). The strings it
// returns are cut from s, one copy of b, so that they share it.
type jsonScanner struct {
	b []byte
	s string // string(b)
	i int
}

// newJSONScanner returns a scanner of data.
func newJSONScanner(data []byte) jsonScanner {
	return jsonScanner{b: data, s: string(data)}
}

// space skips JSON whitespace.
func (p *jsonScanner) space() { p.i = jsonscan.SkipSpace(p.b, p.i) }

// next consumes c if it comes next.
func (p *jsonScanner) next(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// literal consumes lit (true, false or null) if it comes next.
func (p *jsonScanner) literal(lit string) bool {
	return p.advance(jsonscan.Literal(p.b, p.i, lit))
}

// advance moves to end, what a jsonscan function returned, and reports
// whether it found what it looked for.
func (p *jsonScanner) advance(end int) bool {
	if end < 0 {
		return false
	}
	p.i = end
	return true
}

// string consumes a string and returns its value, unquoted as
// encoding/json unquotes it. A string without escapes, of valid UTF-8, is
// a substring of s: no copy.
func (p *jsonScanner) string() (string, bool) {
	start := p.i
	body, escaped, ok := p.quoted()
	if !ok {
		return "", false
	}
	if !escaped && utf8.ValidString(body) {
		return body, true
	}
	var b strings.Builder
	b.Grow(len(body))
	jsonscan.Unquote(&b, p.b[start+1:p.i-1])
	return b.String(), true
}

// quoted consumes a string and returns what is between its quotes, and
// whether it has escapes. Bytes that are not valid UTF-8 are the caller's
// to look for where they matter (unquote replaces them): a key that has
// them is none of the keys the frame decoder knows.
func (p *jsonScanner) quoted() (body string, escaped, ok bool) {
	start := p.i
	end, escaped := jsonscan.String(p.b, start)
	if end < 0 {
		return "", false, false
	}
	p.i = end
	return p.s[start+1 : end-1], escaped, true
}

// unquote returns the value of body, a string's valid escaped contents,
// as encoding/json reads it.
func unquote(body string) string {
	var b strings.Builder
	b.Grow(len(body))
	jsonscan.Unquote(&b, []byte(body))
	return b.String()
}

// number consumes a number and returns its text.
func (p *jsonScanner) number() (string, bool) {
	start := p.i
	if !p.advance(jsonscan.Number(p.b, start)) {
		return "", false
	}
	return p.s[start:p.i], true
}

// value consumes any JSON value, nested no deeper than jsonscan.MaxDepth.
func (p *jsonScanner) value() bool {
	return p.advance(jsonscan.Value(p.b, p.i, 0))
}

// document consumes the whole of the scanner's data as one object whose
// keys have no escapes, as object does with member, and reports whether
// nothing else was there: false leaves the data to encoding/json.
func (p *jsonScanner) document(member func(key string) bool) bool {
	p.space()
	if !p.object(func(key string, escaped bool) bool { return !escaped && member(key) }) {
		return false
	}
	p.space()
	return p.i == len(p.b)
}

// object consumes an object, calling member with each member's key (and
// whether it has escapes, which key does not undo, as quoted returns them)
// with the scanner at the member's value, which member consumes.
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
