package wire

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

// streamIDLen is the length of a stream id: "s" and 26 base32 characters
// carrying 128 random bits, so ids are unguessable and safe as a NATS
// subject token and in a URL path.
const streamIDLen = 27

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewStreamID returns a fresh random stream id.
func NewStreamID() string {
	var b [16]byte
	rand.Read(b[:])
	return "s" + idEncoding.EncodeToString(b[:])
}

// ValidStreamID reports whether id has the shape NewStreamID produces. The
// edge checks it before an id reaches a subject, so no client input can
// inject subject tokens or wildcards.
func ValidStreamID(id string) bool {
	if len(id) != streamIDLen || id[0] != 's' {
		return false
	}
	return strings.IndexFunc(id[1:], func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '2' && r <= '7')
	}) < 0
}
