package wire

import (
	"crypto/rand"
	"encoding/base32"
	"strconv"
	"strings"
)

// streamIDLen is the length of a stream id in partition 0: "s" and 26
// base32 characters carrying 128 random bits, so ids are unguessable and
// safe as a NATS subject token and in a URL path. An id in partition k > 0
// has "-<k>" after them, k in decimal without a leading zero (see
// Partitions).
const streamIDLen = 27

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewStreamID returns a fresh random stream id in partition 0.
func NewStreamID() string { return NewStreamIDIn(0) }

// NewStreamIDIn returns a fresh random stream id in partition k, which
// must be below AllPartitions.
func NewStreamIDIn(k int) string {
	var b [16]byte
	rand.Read(b[:])
	id := "s" + idEncoding.EncodeToString(b[:])
	if k == 0 {
		return id
	}
	return id + "-" + strconv.Itoa(k)
}

// ValidStreamID reports whether id has the shape NewStreamIDIn produces. The
// edge checks it before an id reaches a subject, so no client input can
// inject subject tokens or wildcards.
func ValidStreamID(id string) bool {
	if len(id) < streamIDLen || id[0] != 's' {
		return false
	}
	if len(id) > streamIDLen && !validPartitionSuffix(id[streamIDLen:]) {
		return false
	}
	return strings.IndexFunc(id[1:streamIDLen], func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '2' && r <= '7')
	}) < 0
}

// ValidGenerationID reports whether id is a valid id of a generation's
// stream, in a partition of generations: a worker writes no other.
func ValidGenerationID(id string) bool {
	return ValidStreamID(id) && !IsDurablePartition(Partition(id))
}

// validPartitionSuffix reports whether s is "-<k>" for a partition
// 0 < k < AllPartitions, written as NewStreamIDIn writes it.
func validPartitionSuffix(s string) bool {
	if len(s) < 2 || len(s) > 3 || s[0] != '-' || s[1] == '0' {
		return false
	}
	k := 0
	for _, c := range s[1:] {
		if c < '0' || c > '9' {
			return false
		}
		k = 10*k + int(c-'0')
	}
	return k < AllPartitions
}
