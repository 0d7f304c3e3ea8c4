package jsonscan

import "testing"

func TestValidText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"a":"plain, h\u00e9, \n"}`, true},
		{`{"a":"héllo 😀"}`, true},
		{`{"a":"\ud83d\ude00"}`, true},
		{`{"a":"\uD83D\uDE00"}`, true},
		{`{"a":"\\ud800"}`, true},   // an escaped backslash, then text
		{`{"a":"\\\\ud800"}`, true}, // two
		{`{"a":"x\\"}`, true},
		{"{\"a\":\"\xff\"}", false},
		{"{\"a\":\"\xc3\"}", false},         // cut short
		{"{\"a\":\"\xed\xa0\x80\"}", false}, // a surrogate as UTF-8
		{"{\"a\xfe\":1}", false},            // in a key
		{`{"a":"\ud800"}`, false},           // a lone high surrogate
		{`{"a":"\udc00"}`, false},           // a lone low surrogate
		{`{"a":"\ude00\ud83d"}`, false},     // a pair the wrong way round
		{`{"a":"\ud83d\ud83d"}`, false},     // two high ones
		{`{"a":"\ud83d\u0041"}`, false},     // high, then no low
		{`{"a":"\ud83d"}`, false},           // at the end of the text
		{`{"a":"\ud83d\\ude00"}`, false},    // high, then text
		{`{"a":"\\\ud800"}`, false},         // an escaped backslash, then an escape
	} {
		if got := ValidText([]byte(tc.in)); got != tc.want {
			t.Errorf("ValidText(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
