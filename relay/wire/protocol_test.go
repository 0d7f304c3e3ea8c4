package wire

import (
	"errors"
	"reflect"
	"testing"
)

func TestCursorRoundTrip(t *testing.T) {
	c := Cursor{Seq: 12, JSSeq: 4567}
	got, err := ParseCursor(c.String())
	if err != nil || got != c {
		t.Fatalf("ParseCursor(%q) = %v, %v", c.String(), got, err)
	}
	if z, err := ParseCursor(""); err != nil || !z.IsZero() {
		t.Fatalf("empty cursor = %v, %v", z, err)
	}
}

func TestParseCursorRejects(t *testing.T) {
	for _, s := range []string{"12", "a-b", "0-5", "5-0", "-", "1-2-3", "1--2", " 1-2", "18446744073709551616-1"} {
		if _, err := ParseCursor(s); !errors.Is(err, ErrBadCursor) {
			t.Errorf("ParseCursor(%q) err = %v, want ErrBadCursor", s, err)
		}
	}
}

func TestStreamIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewStreamID()
		if !ValidStreamID(id) {
			t.Fatalf("NewStreamID() = %q is not valid", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
	for _, bad := range []string{"", "s", "sabc", "s" + "a*cdefghijklmnopqrstuvwxyz", "x" + NewStreamID()[1:], NewStreamID() + "a", "s.bcdefghijklmnopqrstuvwxyz"} {
		if ValidStreamID(bad) {
			t.Errorf("ValidStreamID(%q) = true", bad)
		}
	}
}

func TestFrameRoundTrip(t *testing.T) {
	in := Frame{Kind: KindEnd, Status: StatusIncomplete, Error: &Error{Message: "gave up", Type: TypeIncomplete}, Usage: &Usage{PromptTokens: 3, CompletionTokens: 5, TotalTokens: 8,
		CompletionTokensDetails: TokenCounts{{Name: "reasoning_tokens", N: 2}}}}
	out, err := DecodeFrame(in.Encode())
	if err != nil || out.Status != in.Status || out.Error.Message != "gave up" || !reflect.DeepEqual(out.Usage, in.Usage) {
		t.Fatalf("round trip = %+v, %v", out, err)
	}
	if _, err := DecodeFrame([]byte(`{"kind":"bogus"}`)); err == nil {
		t.Fatal("unknown kind decoded")
	}
}
