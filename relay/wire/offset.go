package wire

import (
	"crypto/aes"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// # Durable Stream offsets
//
// A Durable Stream's offset (relay/durable) names the position after one
// frame: its per-stream sequence and its JetStream sequence, as a Cursor
// does. The protocol wants offsets that sort as strings in the order of
// the stream, so an offset is
//
//	<Seq, 16 lower-case hex digits>_<the Cursor sealed, 22 characters>
//
// The fixed-width prefix orders offsets; the sealed part lets a read seek
// straight to the frame without telling the client anything of other
// streams (the prefix counts this stream's frames only). The prefix and
// the sealed sequence must agree, so an altered offset is refused.
// Unlike a resume Cursor, an offset may name the position before a
// stream's first chunk (Seq 0, after the stream's claim frame).

// OffsetLen is the length of every offset.
const OffsetLen = 16 + 1 + SealedCursorLen

// Offset is a position in a Durable Stream: after the frame with
// per-stream sequence Seq stored at JetStream sequence JSSeq.
type Offset struct {
	Seq   uint64
	JSSeq uint64
}

// Offset returns o as a client sees it.
func (k *CursorKey) Offset(o Offset) string {
	b := make([]byte, 0, OffsetLen+aes.BlockSize)
	var seq [8]byte
	putUint(seq[:], o.Seq)
	b = hex.AppendEncode(b, seq[:])
	b = append(b, '_')
	b = k.Append(b, Cursor{Seq: o.Seq, JSSeq: o.JSSeq})
	return string(b)
}

// ParseOffset returns the offset s names, or ErrBadCursor for a string k
// did not make.
func (k *CursorKey) ParseOffset(s string) (Offset, error) {
	bad := fmt.Errorf("%w %q: not an offset of this relay", ErrBadCursor, s)
	if len(s) != OffsetLen || s[16] != '_' {
		return Offset{}, bad
	}
	var prefix [8]byte
	if n, err := hex.Decode(prefix[:], []byte(s[:16])); err != nil || n != 8 || hex.EncodeToString(prefix[:]) != s[:16] {
		return Offset{}, bad
	}
	var block [aes.BlockSize]byte
	if n, err := base64.RawURLEncoding.Strict().Decode(block[:], []byte(s[17:])); err != nil || n != aes.BlockSize {
		return Offset{}, bad
	}
	k.block.Decrypt(block[:], block[:])
	if subtle.ConstantTimeCompare(block[jsSeqBytes+seqBytes:], make([]byte, aes.BlockSize-jsSeqBytes-seqBytes)) != 1 {
		return Offset{}, bad
	}
	o := Offset{JSSeq: getUint(block[:jsSeqBytes]), Seq: getUint(block[jsSeqBytes : jsSeqBytes+seqBytes])}
	if o.Seq != getUint(prefix[:]) {
		return Offset{}, bad
	}
	return o, nil
}
