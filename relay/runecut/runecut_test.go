package runecut

import (
	"testing"
	"unicode/utf8"
)

func TestCutUTF8(t *testing.T) {
	s := []byte("aß数🚀") // 1 + 2 + 3 + 4 bytes
	for n, want := range map[int]int{0: 0, 1: 1, 2: 1, 3: 3, 4: 3, 5: 3, 6: 6, 7: 6, 9: 6, 10: 10, 11: 10} {
		if got := Len(s, n); got != want {
			t.Errorf("Len(%q, %d) = %d, want %d", s, n, got, want)
		}
	}
}

func FuzzCutUTF8(f *testing.F) {
	f.Add("aß数🚀", 5)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if !utf8.ValidString(s) || n < 0 {
			return
		}
		got := Len([]byte(s), n)
		if got > min(n, len(s)) || !utf8.ValidString(s[:got]) || !utf8.ValidString(s[got:]) {
			t.Fatalf("Len(%q, %d) = %d", s, n, got)
		}
		if n >= utf8.UTFMax && got == 0 && len(s) > 0 {
			t.Fatalf("Len(%q, %d) cut nothing", s, n)
		}
	})
}
