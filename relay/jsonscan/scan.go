package jsonscan

// MaxDepth bounds the nesting Value follows. The relay's JSON nests a
// handful of levels; deeper data is left to encoding/json (which allows
// 10000).
const MaxDepth = 64

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace. Unlike bytes.TrimSpace it knows no Unicode spaces.
func SkipSpace(b []byte, i int) int {
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

// String returns the index after the JSON string that opens at b[i] and
// whether it holds an escape; -1 if it is not a valid string. Bytes that
// are not UTF-8 are valid, as in encoding/json (which decodes each to
// U+FFFD); control characters are not.
func String(b []byte, i int) (end int, escaped bool) {
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
				if Hex4(b[j+1:]) < 0 {
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

// Hex4 returns the value of the four hex digits h begins with, -1 if it
// does not begin with four.
func Hex4(h []byte) rune {
	if len(h) < 4 {
		return -1
	}
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

// Number returns the index after the JSON number that starts at b[i], -1
// if none does. What follows the number is the caller's to check.
func Number(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i = digits(b, i+1); i < 0 {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		i = digits(b, i)
	}
	return i
}

// digits returns the index after the run of digits at b[i], -1 if there
// is none.
func digits(b []byte, i int) int {
	start := i
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	if i == start {
		return -1
	}
	return i
}

// Literal returns the index after lit (true, false or null) if b[i:]
// starts with it, -1 otherwise.
func Literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// Value returns the index after the JSON value that starts at b[i],
// validating it; -1 if it is invalid or nests deeper than MaxDepth. depth
// is how many objects and arrays already enclose b[i].
func Value(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := String(b, i)
		return end
	case '{', '[':
		if depth >= MaxDepth {
			return -1
		}
		return composite(b, i, depth+1)
	case 't':
		return Literal(b, i, "true")
	case 'f':
		return Literal(b, i, "false")
	case 'n':
		return Literal(b, i, "null")
	}
	return Number(b, i)
}

// composite skips the object or array that opens at b[i].
func composite(b []byte, i, depth int) int {
	closer, object := byte(']'), b[i] == '{'
	if object {
		closer = '}'
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == closer {
		return i + 1
	}
	for {
		if object {
			if i, _ = String(b, i); i < 0 {
				return -1
			}
			if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
				return -1
			}
			i = SkipSpace(b, i+1)
		}
		if i = Value(b, i, depth); i < 0 {
			return -1
		}
		switch i = SkipSpace(b, i); {
		case i >= len(b):
			return -1
		case b[i] == closer:
			return i + 1
		case b[i] != ',':
			return -1
		}
		i = SkipSpace(b, i+1)
	}
}
