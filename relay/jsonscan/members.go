package jsonscan

// Members calls f with the key and the value of each member of the object
// that opens at b[i], in order, until f returns false, and reports whether
// the object was valid JSON with unescaped keys only, nothing but space
// after it in b, and f returned true for every member. Each value is
// validated (Value) before f sees it. Keys are the bytes between their
// quotes: a key with an escape, which would have to be unquoted to be
// compared, ends the walk with false, and one with bytes that are not
// UTF-8 never equals the ASCII name a caller looks for, as in
// encoding/json.
func Members(b []byte, i int, f func(key, val []byte) bool) bool {
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return SkipSpace(b, i+1) == len(b)
	}
	for {
		end, escaped := String(b, i)
		if end < 0 || escaped {
			return false
		}
		key := b[i+1 : end-1]
		if i = SkipSpace(b, end); i >= len(b) || b[i] != ':' {
			return false
		}
		i = SkipSpace(b, i+1)
		if end = Value(b, i, 1); end < 0 || !f(key, b[i:end]) {
			return false
		}
		switch i = SkipSpace(b, end); {
		case i >= len(b):
			return false
		case b[i] == ',':
			i = SkipSpace(b, i+1)
		case b[i] == '}':
			return SkipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// Elements calls f with each element of the array val, a value Value
// accepted, until f returns false, and reports whether f returned true for
// every one.
func Elements(val []byte, f func(elem []byte) bool) bool {
	i := SkipSpace(val, 1)
	if i < len(val) && val[i] == ']' {
		return true
	}
	for {
		end := Value(val, i, 1)
		if end < 0 || !f(val[i:end]) {
			return false
		}
		i = SkipSpace(val, end)
		if val[i] == ']' {
			return true
		}
		i = SkipSpace(val, i+1) // a comma: val is valid
	}
}
