package wire

import (
	"errors"
	"strings"
	"testing"
)

func testKey(t testing.TB) *CursorKey {
	k, err := NewCursorKey([]byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestOffsetRoundTripsAndSorts(t *testing.T) {
	k := testKey(t)
	offsets := []Offset{{0, 1}, {1, 2}, {2, 900}, {15, 901}, {16, 3}, {255, 1 << 40}, {1<<40 - 1, 1<<56 - 1}}
	prev := ""
	for _, o := range offsets {
		s := k.Offset(o)
		if len(s) != OffsetLen || strings.ContainsAny(s, ",&=?/") || s == "-1" || s == "now" {
			t.Fatalf("offset %q of %v: not a protocol offset", s, o)
		}
		if s <= prev {
			t.Fatalf("offset %q of %v sorts before %q", s, o, prev)
		}
		prev = s
		got, err := k.ParseOffset(s)
		if err != nil || got != o {
			t.Fatalf("ParseOffset(%q) = %v, %v; want %v", s, got, err, o)
		}
	}
}

func TestOffsetRefusesAlteredOnes(t *testing.T) {
	k := testKey(t)
	s := k.Offset(Offset{Seq: 0xa7, JSSeq: 42})
	other, _ := NewCursorKey([]byte("fedcba9876543210"))
	for _, bad := range []string{"", "-1", "now", s[:len(s)-1], strings.Replace(s, "7", "8", 1),
		strings.ToUpper(s[:16]) + s[16:], other.Offset(Offset{Seq: 7, JSSeq: 42}), k.String(Cursor{Seq: 7, JSSeq: 42})} {
		if _, err := k.ParseOffset(bad); !errors.Is(err, ErrBadCursor) {
			t.Errorf("ParseOffset(%q) = %v, want ErrBadCursor", bad, err)
		}
	}
}

func FuzzOffset(f *testing.F) {
	k := testKey(f)
	f.Add(uint64(0), uint64(1), k.Offset(Offset{Seq: 3, JSSeq: 9}))
	f.Fuzz(func(t *testing.T, seq, jsSeq uint64, s string) {
		o := Offset{Seq: seq & (1<<40 - 1), JSSeq: jsSeq & (1<<56 - 1)}
		if got, err := k.ParseOffset(k.Offset(o)); err != nil || got != o {
			t.Fatalf("round trip of %v: %v, %v", o, got, err)
		}
		if got, err := k.ParseOffset(s); err == nil && k.Offset(got) != s {
			t.Fatalf("ParseOffset(%q) = %v, which renders as %q", s, got, k.Offset(got))
		}
	})
}
