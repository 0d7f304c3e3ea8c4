package worker

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestOverlapFilter(t *testing.T) {
	const published = "Die Straße ist schön, 数据流式 🚀 and the relay"
	for _, tc := range []struct {
		name   string
		deltas []string
		want   string
	}{
		{"no repeat", []string{" keeps", " going"}, " keeps going"},
		{"repeat in one delta", []string{" 🚀 and the relay keeps"}, " keeps"},
		{"repeat across deltas", []string{" 🚀", " and", " the re", "lay", " keeps"}, " keeps"},
		{"longest repeat wins", []string{"ße ist schön, 数据流式 🚀 and the relay!"}, "!"},
		{"the whole tail repeated", []string{published + " more"}, " more"},
		{"short repeat is kept", []string{"e relay", " keeps"}, "e relay keeps"},
		{"partial repeat then divergence is kept", []string{" 🚀 and the", " rest"}, " 🚀 and the rest"},
		{"stream ends while holding", []string{" 🚀 and the re"}, " 🚀 and the re"},
		{"exact repeat and nothing else", []string{"and the relay"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newOverlapFilter(published)
			var got strings.Builder
			for _, d := range tc.deltas {
				got.WriteString(f.feed(d))
			}
			got.WriteString(f.flush())
			if got.String() != tc.want {
				t.Fatalf("continuation = %q, want %q", got.String(), tc.want)
			}
		})
	}
}

func TestOverlapFilterReleasesANonRepeatAtOnce(t *testing.T) {
	f := newOverlapFilter("a long enough answer so far")
	if got := f.feed("Next"); got != "Next" {
		t.Fatalf("first delta held back: got %q", got)
	}
}

func TestOverlapFilterWindow(t *testing.T) {
	published := strings.Repeat("ß", overlapWindow) // 2 bytes each: the window starts mid-text
	f := newOverlapFilter(published)
	if !utf8.ValidString(f.tail) || len(f.tail) > overlapWindow {
		t.Fatalf("tail of %d bytes, valid UTF-8 %v", len(f.tail), utf8.ValidString(f.tail))
	}
	// A repeat longer than the window is stripped up to the window only.
	got := f.feed(published+"x") + f.flush()
	if want := published[:len(published)-len(f.tail)] + "x"; got != want {
		t.Fatalf("got %d bytes, want %d", len(got), len(want))
	}
}

func TestOverlapFilterNil(t *testing.T) {
	var f *overlapFilter
	if f.feed("x") != "x" || f.flush() != "" {
		t.Fatal("a nil filter must pass text through")
	}
	if g := newOverlapFilter("short"); g.feed("short") != "short" {
		t.Fatal("a published text shorter than the minimum overlap cannot be repeated")
	}
}

func FuzzOverlapFilter(f *testing.F) {
	f.Add("the relay keeps the answer", "keeps the answer and more", 3)
	f.Add("数据流式 🚀 Straße", "式 🚀 Straße über", 1)
	f.Fuzz(func(t *testing.T, published, cont string, pieces int) {
		if !utf8.ValidString(published) || !utf8.ValidString(cont) {
			return
		}
		filter := newOverlapFilter(published)
		var got strings.Builder
		n := max(pieces%8, 1)
		for i := range n {
			// Deltas are whole runes, as JSON strings are.
			lo, hi := runeCut(cont, i, n), runeCut(cont, i+1, n)
			got.WriteString(filter.feed(cont[lo:hi]))
		}
		got.WriteString(filter.flush())
		out := got.String()
		if !strings.HasSuffix(cont, out) {
			t.Fatalf("output %q is not a suffix of the continuation %q", out, cont)
		}
		dropped := cont[:len(cont)-len(out)]
		if dropped != "" && (utf8.RuneCountInString(dropped) < minOverlapRunes || !strings.HasSuffix(published, dropped)) {
			t.Fatalf("dropped %q, which is not a long enough suffix of %q", dropped, published)
		}
		if !utf8.ValidString(out) {
			t.Fatalf("output %q is not valid UTF-8", out)
		}
	})
}

// runeCut returns the byte offset of the i-th of n roughly equal cuts of s,
// on a rune boundary.
func runeCut(s string, i, n int) int {
	at := len(s) * i / n
	for at < len(s) && !utf8.RuneStart(s[at]) {
		at++
	}
	return at
}
