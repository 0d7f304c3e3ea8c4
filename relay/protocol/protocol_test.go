package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
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

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "1-1", "12-4567", "x", "1-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			return
		}
		if s != "" && c.String() != s {
			// Leading zeros parse but do not round-trip; the parsed value
			// must still round-trip.
			if again, err := ParseCursor(c.String()); err != nil || again != c {
				t.Fatalf("%q -> %v does not round-trip", s, c)
			}
		}
	})
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
	in := Frame{Kind: KindEnd, Status: StatusIncomplete, Error: &Error{Message: "gave up", Type: TypeIncomplete}, Usage: &Usage{PromptTokens: 3, CompletionTokens: 5, TotalTokens: 8}}
	out, err := DecodeFrame(in.Encode())
	if err != nil || out.Status != in.Status || out.Error.Message != "gave up" || *out.Usage != *in.Usage {
		t.Fatalf("round trip = %+v, %v", out, err)
	}
	if _, err := DecodeFrame([]byte(`{"kind":"bogus"}`)); err == nil {
		t.Fatal("unknown kind decoded")
	}
}

// FuzzFrameEncode checks that Encode renders frames byte for byte as
// json.Marshal does, also where it does not use json.Marshal.
func FuzzFrameEncode(f *testing.F) {
	f.Add("chunk", uint64(1), "assistant", "Hello, 世界", "openai", "gpt-4o", 1, "retry", 1, int64(350), "", "", "", 0, 0.0)
	f.Add("chunk", uint64(9), "", "<a href=\"x\">&amp;</a>\\ \b\f\n\r\t\x00\x1f\x7f \u2028\u2029 \xff\xe4\xb8 🚀", "p", "m", 2, "", -3, int64(-1), "w", "", "", 0, 0.0)
	f.Add("claim", uint64(0), "", "", "", "", 0, "", 0, int64(0), "worker-1", "", "", 0, 0.0)
	f.Add("end", uint64(10), "", "", "", "", 0, "", 0, int64(0), "", "done", "stop", 2, 0.0)
	f.Add("end", uint64(10), "", "", "", "", 0, "", 0, int64(0), "", "done", "stop", 2, 0.25)
	f.Fuzz(func(t *testing.T, kind string, seq uint64, role, content, provider, model string, attempt int, seam string, tokens int, ttft int64, worker, status, finish string, attempts int, cost float64) {
		if math.IsNaN(cost) || math.IsInf(cost, 0) {
			return
		}
		fr := Frame{
			Kind: Kind(kind), Seq: seq, Role: role, Content: content, Provider: provider, Model: model,
			Attempt: attempt, Seam: Seam(seam), Tokens: tokens, UpstreamTTFTMS: ttft, Worker: worker,
			Status: Status(status), FinishReason: finish, Attempts: attempts, Cost: cost,
		}
		want, err := json.Marshal(fr)
		if err != nil {
			t.Fatal(err)
		}
		if got := fr.Encode(); !bytes.Equal(got, want) {
			t.Fatalf("Encode(%+v)\n= %s\nwant %s", fr, got, want)
		}
	})
}

// BenchmarkEncodeChunk encodes a one-token chunk frame as a worker stores
// one per token of a paced stream.
func BenchmarkEncodeChunk(b *testing.B) {
	f := Frame{Kind: KindChunk, Seq: 1234, Content: " world", Provider: "openai", Model: "gpt-4o-2024-08-06", Attempt: 1, Tokens: 1}
	b.ReportAllocs()
	for b.Loop() {
		f.Encode()
	}
}
