package jsonscan

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// ValidText reports whether the text of JSON b means what it says:
// valid UTF-8, and \u escapes of surrogates only as a high one followed by
// a low one. encoding/json decodes anything else to U+FFFD, so a check
// that decodes cannot see it, while a body forwarded as it came carries it
// on to a provider, whose parser may read it otherwise.
func ValidText(b []byte) bool {
	return utf8.Valid(b) && surrogatesPaired(b)
}

// surrogatesPaired reports whether every \u escape of a surrogate in b is
// a high one followed by the escape of a low one. b need not be valid
// JSON: a backslash outside a string makes it invalid anyway.
func surrogatesPaired(b []byte) bool {
	for {
		i := bytes.IndexByte(b, '\\')
		if i < 0 || i+1 == len(b) {
			return true
		}
		if b[i+1] != 'u' {
			b = b[i+2:] // an escaped backslash escapes nothing after it
			continue
		}
		r := Hex4(b[i+2:])
		if r < 0 {
			b = b[i+2:]
			continue
		}
		b = b[i+6:]
		if !utf16.IsSurrogate(r) {
			continue
		}
		if r >= 0xDC00 || len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
			return false
		}
		if low := Hex4(b[2:]); low < 0xDC00 || low > 0xDFFF {
			return false
		}
		b = b[6:]
	}
}
