package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Cursor identifies one delivered chunk: its per-stream sequence and the
// JetStream sequence it is stored at. The zero Cursor means "before the
// first chunk".
//
// A Cursor is never shown to a client as it is: the JetStream sequence
// counts the frames of every stream of the partition, other tenants'
// included. Clients see it sealed by a CursorKey.
type Cursor struct {
	Seq   uint64 // per-stream chunk sequence, 1..N without gaps
	JSSeq uint64 // sequence of the frame in its partition's chunk stream
}

// ErrBadCursor is returned for a cursor that does not parse.
var ErrBadCursor = errors.New("malformed cursor")

// IsZero reports whether c is the start of a stream.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// KeyBucket is the KV bucket of the cluster's own secrets, without TTL:
// CursorKeyName holds the key every edge seals cursors with, created by
// the first edge that needs it.
const (
	KeyBucket     = "relay_keys"
	CursorKeyName = "cursor"
)

// CursorKeySize is the size of a cursor key (AES-128).
const CursorKeySize = 16

// SealedCursorLen is the length of a sealed cursor: one AES block in
// unpadded base64url, safe in a URL, a header and an SSE id.
const SealedCursorLen = 22

// A sealed cursor is one AES block, the encryption of
//
//	bytes 0-6   JSSeq (56 bits, big-endian)
//	bytes 7-11  Seq (40 bits)
//	bytes 12-15 zero
//
// As AES is a pseudorandom permutation, a client learns nothing of the
// position from the block, and a block it made up or changed decrypts to
// noise whose last 32 bits are zero once in 2^32 tries; even then it only
// names a position, which a resume checks belongs to the stream named.
// Neither sequence comes near its width: 2^56 frames is two thousand
// years at a million a second.
const (
	jsSeqBytes = 7
	seqBytes   = 5
)

// CursorKey seals cursors for clients and opens them again. One key
// serves the whole cluster, so a client resumes on any edge.
type CursorKey struct{ block cipher.Block }

// NewCursorKey returns the CursorKey of a secret of CursorKeySize bytes.
func NewCursorKey(secret []byte) (*CursorKey, error) {
	if len(secret) != CursorKeySize {
		return nil, fmt.Errorf("wire: cursor key of %d bytes, want %d", len(secret), CursorKeySize)
	}
	block, err := aes.NewCipher(secret)
	if err != nil {
		return nil, fmt.Errorf("wire: cursor key: %w", err)
	}
	return &CursorKey{block: block}, nil
}

// Append appends c sealed (SealedCursorLen bytes). It allocates nothing
// when b has room for SealedCursorLen+aes.BlockSize more bytes: the block
// is encrypted in that room, as a block on the stack would escape to the
// heap through the cipher's interface.
func (k *CursorKey) Append(b []byte, c Cursor) []byte {
	n := len(b)
	b = append(b, make([]byte, SealedCursorLen+aes.BlockSize)...)
	block := b[n+SealedCursorLen:]
	putUint(block[:jsSeqBytes], c.JSSeq)
	putUint(block[jsSeqBytes:jsSeqBytes+seqBytes], c.Seq)
	clear(block[jsSeqBytes+seqBytes:])
	k.block.Encrypt(block, block)
	base64.RawURLEncoding.Encode(b[n:n+SealedCursorLen], block)
	return b[:n+SealedCursorLen]
}

// String returns c sealed.
func (k *CursorKey) String(c Cursor) string {
	return string(k.Append(make([]byte, 0, SealedCursorLen+aes.BlockSize), c))
}

// Parse returns the cursor a client resumes after: the zero cursor for
// "", a cursor sealed by k, or one in the plain form "<seq>-<jsseq>" that
// edges showed before cursors were sealed, so that clients holding one
// across an upgrade resume where they were. Anything else, a sealed
// cursor altered included, is ErrBadCursor.
func (k *CursorKey) Parse(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	if c, ok := k.open(s); ok {
		return c, nil
	}
	if c, ok := parsePlain(s); ok {
		return c, nil
	}
	return Cursor{}, fmt.Errorf("%w %q: not a cursor of this relay", ErrBadCursor, s)
}

// open returns the cursor s seals, and whether s is one k sealed.
func (k *CursorKey) open(s string) (Cursor, bool) {
	var block [aes.BlockSize]byte
	if len(s) != SealedCursorLen {
		return Cursor{}, false
	}
	if n, err := base64.RawURLEncoding.Strict().Decode(block[:], []byte(s)); err != nil || n != aes.BlockSize {
		return Cursor{}, false
	}
	k.block.Decrypt(block[:], block[:])
	if subtle.ConstantTimeCompare(block[jsSeqBytes+seqBytes:], make([]byte, aes.BlockSize-jsSeqBytes-seqBytes)) != 1 {
		return Cursor{}, false
	}
	c := Cursor{JSSeq: getUint(block[:jsSeqBytes]), Seq: getUint(block[jsSeqBytes : jsSeqBytes+seqBytes])}
	return c, c.Seq != 0 && c.JSSeq != 0
}

// parsePlain parses the plain form "<seq>-<jsseq>" of two positive
// integers.
func parsePlain(s string) (Cursor, bool) {
	seqText, jsText, ok := strings.Cut(s, "-")
	if !ok {
		return Cursor{}, false
	}
	seq, err1 := strconv.ParseUint(seqText, 10, 64)
	js, err2 := strconv.ParseUint(jsText, 10, 64)
	if err1 != nil || err2 != nil || seq == 0 || js == 0 {
		return Cursor{}, false
	}
	return Cursor{Seq: seq, JSSeq: js}, true
}

// putUint writes the low len(b) bytes of v into b, big-endian.
func putUint(b []byte, v uint64) {
	var all [8]byte
	binary.BigEndian.PutUint64(all[:], v)
	copy(b, all[8-len(b):])
}

// getUint reads b, big-endian.
func getUint(b []byte) uint64 {
	var all [8]byte
	copy(all[8-len(b):], b)
	return binary.BigEndian.Uint64(all[:])
}
