package wire

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzStreamCursor: a resume names its stream and cursor in a URL, a
// header or a WebSocket message, which anyone can write. A stream id is
// accepted only in the shape NewStreamID makes; a cursor is refused with
// ErrBadCursor, or is the zero cursor for "", or has positive sequences,
// and seals to a cursor that parses back to it (within the widths a
// sealed cursor holds). A cursor sealed with another key is refused.
//
// The edge's own harness of the same inputs (which parameter a cursor came
// from, the 400 naming it) lives on as edge.TestStreamCursorSources: in the
// edge's test binary, which links a nats-server, fuzzing managed a few
// hundred executions a second, as every execution resets and scans the
// coverage counters of every package linked.
func FuzzStreamCursor(f *testing.F) {
	k, other := testCursorKey(f, 8), testCursorKey(f, 9)
	for _, s := range [][2]string{
		{"sabcdefghijklmnopqrstuvwxyz", ""}, {"sabcdefghijklmnopqrstuvwxyz-3", "2-4"}, {"sabcdefghijklmnopqrstuvwxyz-9", ""}, {"sabcdefghijklmnopqrstuvwxyz-15", ""}, {"sabcdefghijklmnopqrstuvwxyz-16", ""}, {"sabcdefghijklmnopqrstuvwxyz-08", ""}, {"sabcdefghijklmnopqrstuvwxyz", "3-9"}, {"sabcdefghijklmnopqrstuvwxy1", "0-1"},
		{"", "1-"}, {"s", "-1-2"}, {"sabcdefghijklmnopqrstuvwxyz", "18446744073709551616-1"}, {"x", "007-8"}, {"y", "1-2-3"},
		{"sabcdefghijklmnopqrstuvwxyz", k.String(Cursor{Seq: 2, JSSeq: 4})}, {"sabcdefghijklmnopqrstuvwxyz", other.String(Cursor{Seq: 2, JSSeq: 4})},
		{"sabcdefghijklmnopqrstuvwxyz", "AAAAAAAAAAAAAAAAAAAAAA"}, {"sabcdefghijklmnopqrstuvwxyz", "1234567890-12345678901"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, id, cursor string) {
		if ValidStreamID(id) != validIDShape(id) {
			t.Fatalf("ValidStreamID(%q) = %t", id, ValidStreamID(id))
		}
		c, err := k.Parse(cursor)
		switch {
		case err != nil:
			if !errors.Is(err, ErrBadCursor) || !c.IsZero() {
				t.Fatalf("%q: %v, %v", cursor, c, err)
			}
		case cursor == "":
			if !c.IsZero() {
				t.Fatalf("empty cursor parsed as %v", c)
			}
		case c.Seq == 0 || c.JSSeq == 0:
			t.Fatalf("cursor %q parsed as %v", cursor, c)
		case c.Seq < 1<<40 && c.JSSeq < 1<<56:
			sealed := k.String(c)
			if back, err := k.Parse(sealed); err != nil || back != c {
				t.Fatalf("cursor %q parsed as %v, sealed as %q, which parses as %v, %v", cursor, c, sealed, back, err)
			}
			if back, err := other.Parse(sealed); !errors.Is(err, ErrBadCursor) {
				t.Fatalf("cursor %q sealed as %q opens with another key as %v, %v", cursor, sealed, back, err)
			}
		}
	})
}

// validIDShape is the shape of NewStreamID's ids, written out plainly.
func validIDShape(id string) bool {
	if len(id) < 27 || id[0] != 's' {
		return false
	}
	suffixes := []string{"-1", "-2", "-3", "-4", "-5", "-6", "-7", "-8", "-9", "-10", "-11", "-12", "-13", "-14", "-15"}
	if suffix := id[27:]; suffix != "" && !slices.Contains(suffixes, suffix) {
		return false
	}
	for _, r := range id[1:27] {
		if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz234567", r) {
			return false
		}
	}
	return true
}
