package wire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Cursor identifies one delivered chunk: its per-stream sequence and the
// JetStream sequence it is stored at. The zero Cursor means "before the
// first chunk".
type Cursor struct {
	Seq   uint64 // per-stream chunk sequence, 1..N without gaps
	JSSeq uint64 // sequence of the frame in its partition's chunk stream
}

// ErrBadCursor is returned for a cursor that does not parse.
var ErrBadCursor = errors.New("malformed cursor")

// String renders the cursor as the SSE event id "<seq>-<jsseq>".
func (c Cursor) String() string {
	return string(c.Append(make([]byte, 0, 24)))
}

// Append appends the cursor as String renders it, for a caller that
// renders events into a buffer of its own.
func (c Cursor) Append(b []byte) []byte {
	b = strconv.AppendUint(b, c.Seq, 10)
	b = append(b, '-')
	return strconv.AppendUint(b, c.JSSeq, 10)
}

// IsZero reports whether c is the start of a stream.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// ParseCursor parses a cursor produced by String. The empty string is the
// zero cursor (from the start).
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	seqText, jsText, ok := strings.Cut(s, "-")
	if !ok {
		return Cursor{}, fmt.Errorf("%w %q: want <seq>-<jsseq>", ErrBadCursor, s)
	}
	seq, err1 := strconv.ParseUint(seqText, 10, 64)
	js, err2 := strconv.ParseUint(jsText, 10, 64)
	if err1 != nil || err2 != nil || seq == 0 || js == 0 {
		return Cursor{}, fmt.Errorf("%w %q: want two positive integers", ErrBadCursor, s)
	}
	return Cursor{Seq: seq, JSSeq: js}, nil
}
