package wire

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// testCursorKey is a fixed key, so that failures reproduce.
func testCursorKey(t testing.TB, fill byte) *CursorKey {
	t.Helper()
	k, err := NewCursorKey(bytes.Repeat([]byte{fill}, CursorKeySize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestCursorSealedRoundTrip(t *testing.T) {
	k := testCursorKey(t, 1)
	for _, c := range []Cursor{{Seq: 12, JSSeq: 4567}, {Seq: 1, JSSeq: 1}, {Seq: 1<<40 - 1, JSSeq: 1<<56 - 1}} {
		s := k.String(c)
		if len(s) != SealedCursorLen || strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Fatalf("%v sealed as %q: want %d base64url characters", c, s, SealedCursorLen)
		}
		if got, err := k.Parse(s); err != nil || got != c {
			t.Fatalf("Parse(%q) = %v, %v; want %v", s, got, err, c)
		}
	}
	if z, err := k.Parse(""); err != nil || !z.IsZero() {
		t.Fatalf("empty cursor = %v, %v", z, err)
	}
}

// TestCursorSealedRevealsNoPosition: neither sequence can be read from a
// sealed cursor, and cursors of neighbouring positions share nothing a
// client could count with.
func TestCursorSealedRevealsNoPosition(t *testing.T) {
	k := testCursorKey(t, 2)
	a, b := k.String(Cursor{Seq: 1, JSSeq: 5549}), k.String(Cursor{Seq: 2, JSSeq: 5550})
	for _, s := range []string{a, b} {
		if strings.Contains(s, "5549") || strings.Contains(s, "5550") {
			t.Fatalf("sealed cursor %q shows its JetStream sequence", s)
		}
	}
	same := 0
	for i := range SealedCursorLen {
		if a[i] == b[i] {
			same++
		}
	}
	if same > SealedCursorLen/2 {
		t.Fatalf("cursors of neighbouring frames %q and %q share %d characters", a, b, same)
	}
}

// TestCursorPlainStillParses: a client holding a cursor from before
// cursors were sealed resumes where it was.
func TestCursorPlainStillParses(t *testing.T) {
	k := testCursorKey(t, 3)
	if c, err := k.Parse("12-4567"); err != nil || c != (Cursor{Seq: 12, JSSeq: 4567}) {
		t.Fatalf("Parse(12-4567) = %v, %v", c, err)
	}
}

func TestCursorParseRejects(t *testing.T) {
	k := testCursorKey(t, 4)
	sealed := k.String(Cursor{Seq: 3, JSSeq: 9})
	bad := []string{"12", "a-b", "0-5", "5-0", "-", "1-2-3", "1--2", " 1-2", "18446744073709551616-1",
		sealed[1:], sealed + "A", testCursorKey(t, 5).String(Cursor{Seq: 3, JSSeq: 9})}
	// Every other character at every place.
	for i := range SealedCursorLen {
		for _, r := range "AQgw_-09az" {
			if altered := sealed[:i] + string(r) + sealed[i+1:]; altered != sealed {
				bad = append(bad, altered)
			}
		}
	}
	for _, s := range bad {
		if c, err := k.Parse(s); !errors.Is(err, ErrBadCursor) || !c.IsZero() {
			t.Errorf("Parse(%q) = %v, %v; want ErrBadCursor", s, c, err)
		}
	}
}

// TestCursorAppendAllocatesNothing: the edge seals a cursor into every
// event it renders.
func TestCursorAppendAllocatesNothing(t *testing.T) {
	k := testCursorKey(t, 6)
	buf := make([]byte, 0, 256)
	var seq uint64
	if n := testing.AllocsPerRun(100, func() {
		seq++
		buf = k.Append(buf[:0], Cursor{Seq: seq, JSSeq: seq + 100})
	}); n != 0 {
		t.Fatalf("Append allocates %v times", n)
	}
}

func BenchmarkCursorAppend(b *testing.B) {
	k := testCursorKey(b, 7)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for i := range b.N {
		buf = k.Append(buf[:0], Cursor{Seq: uint64(i) + 1, JSSeq: uint64(i) + 100})
	}
}

// BenchmarkCursorAppendPlain is the plain form edges rendered before
// cursors were sealed, to compare with.
func BenchmarkCursorAppendPlain(b *testing.B) {
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for i := range b.N {
		buf = strconv.AppendUint(buf[:0], uint64(i)+1, 10)
		buf = append(buf, '-')
		buf = strconv.AppendUint(buf, uint64(i)+100, 10)
	}
}
