package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// seeds are values at the edges of what the scanner must tell apart.
var seeds = []string{
	`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e16\ud83d\ude00"`, `"\ud83d"`, `"\ude00\ud83d"`,
	`"\ud83d\u0041"`, `"\ud83dx"`, `"\uD83D\uDE00"`, "\"\xff\xfe\xed\xa0\x80\xef\xbf\xbd\"", `"\u"`, `"\u12"`,
	`"\x"`, `"\'"`, "\"a\x01\"", `"open`, `0`, `-0`, `-`, `01`, `1.`, `1.5e`, `1.5E+10`, `-0.0e-0`, `1e5`,
	`true`, `tru`, `nul`, `null`, `false`, `[]`, `[ ]`, `[1,]`, `[,1]`, `{}`, `{ }`, `{"a":1,}`, `{"a" 1}`,
	`{"a":[{"b":null}],"c":"d"}`, `{1:2}`, `[[[[]]]]`, strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
}

// FuzzValue holds Value to json.Valid: a value it accepts ends where the
// first value of the data ends for encoding/json, and a value it refuses
// is not one, or nests deeper than it follows.
func FuzzValue(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		start := SkipSpace(in, 0)
		end := Value(in, start, 0)
		if end < 0 {
			if json.Valid(in) && depth(in) <= MaxDepth {
				t.Fatalf("Value(%q) refused a valid value", in)
			}
			return
		}
		if !json.Valid(in[start:end]) {
			t.Fatalf("Value(%q) accepted %q, which is not valid JSON", in, in[start:end])
		}
		if rest := in[end:]; json.Valid(in) && len(bytes.TrimLeft(rest, " \t\r\n")) > 0 {
			t.Fatalf("Value(%q) ended at %d, before the value's end", in, end)
		}
	})
}

// depth is the deepest nesting of brackets in in, a valid JSON text,
// outside strings.
func depth(in []byte) int {
	d, deepest := 0, 0
	for i := 0; i < len(in); i++ {
		switch in[i] {
		case '"':
			end, _ := String(in, i)
			i = end - 1
		case '[', '{':
			d++
			deepest = max(deepest, d)
		case ']', '}':
			d--
		}
	}
	return deepest
}

// FuzzUnquote holds String and Unquote to json.Unmarshal: the same
// strings valid, and each decoded to the same bytes.
func FuzzUnquote(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want string
		wantErr := json.Unmarshal(in, &want)
		end, escaped := String(in, 0)
		if end < 0 && wantErr == nil && len(in) > 0 && in[0] == '"' {
			t.Fatalf("String(%q) refused a JSON string", in)
		}
		if end != len(in) {
			return // not one string alone
		}
		if wantErr != nil {
			t.Fatalf("String(%q) accepted what json.Unmarshal refuses: %v", in, wantErr)
		}
		if escaped != bytes.ContainsRune(in, '\\') {
			t.Fatalf("String(%q) escaped = %v", in, escaped)
		}
		var b strings.Builder
		Unquote(&b, in[1:len(in)-1])
		if b.String() != want {
			t.Fatalf("Unquote(%q) = %q, want %q", in, b.String(), want)
		}
	})
}

// FuzzNumber holds Number to json.Valid: a number it accepts alone is
// valid JSON, and a valid JSON number is one it accepts to its end.
func FuzzNumber(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		end := Number(in, 0)
		isNumber := json.Valid(in) && len(in) > 0 &&
			(in[0] == '-' || '0' <= in[0] && in[0] <= '9') && '0' <= in[len(in)-1] && in[len(in)-1] <= '9'
		switch {
		case isNumber && end != len(in):
			t.Fatalf("Number(%q) = %d, want %d", in, end, len(in))
		case end == len(in) && !json.Valid(in):
			t.Fatalf("Number(%q) accepted what json.Valid refuses", in)
		}
	})
}

func TestValueDepth(t *testing.T) {
	deepest := []byte(strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth))
	if end := Value(deepest, 0, 0); end != len(deepest) {
		t.Errorf("Value of %d nested arrays = %d, want %d", MaxDepth, end, len(deepest))
	}
	if end := Value(deepest, 0, 1); end != -1 {
		t.Errorf("Value of %d nested arrays inside one more = %d, want -1", MaxDepth, end)
	}
}
