// Package runecut cuts UTF-8 text into pieces of bounded size without
// splitting a rune, so that each piece of valid text is valid text.
//
// It is a package of its own, with no dependencies, so that its fuzz test
// runs fast: fuzzing instruments every package linked into the test
// binary, and a worker's test binary links a whole nats-server, whose
// coverage counters each execution would reset and scan.
package runecut

import "unicode/utf8"

// Len returns the length of the longest prefix of b of at most n bytes
// that does not end inside a rune.
func Len(b []byte, n int) int {
	if len(b) <= n {
		return len(b)
	}
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	// Not UTF-8 around n: any cut is as good as another.
	return n
}
