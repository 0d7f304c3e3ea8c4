package upstream

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// jsonSeeds are values at the edges of what the scanner must tell apart.
var jsonSeeds = []string{
	`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e16\ud83d\ude00"`, `"\ud83d"`, `"\ude00\ud83d"`,
	`"\ud83d\u0041"`, `"\ud83dx"`, `"\uD83D\uDE00"`, "\"\xff\xfe\xed\xa0\x80\xef\xbf\xbd\"", `"\u"`, `"\u12"`,
	`"\x"`, `"\'"`, "\"a\x01\"", `"open`, `0`, `-0`, `-`, `01`, `1.`, `1.5e`, `1.5E+10`, `-0.0e-0`, `1e5`,
	`true`, `tru`, `nul`, `null`, `false`, `[]`, `[ ]`, `[1,]`, `[,1]`, `{}`, `{ }`, `{"a":1,}`, `{"a" 1}`,
	`{"a":[{"b":null}],"c":"d"}`, `{1:2}`, `[[[[]]]]`, strings.Repeat("[", maxScanDepth) + strings.Repeat("]", maxScanDepth),
}

// FuzzSkipValue holds skipValue to json.Valid: a value it accepts ends
// where the first value of the data ends for encoding/json, and a value
// it refuses is not one, or nests deeper than it follows.
func FuzzSkipValue(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		start := skipSpace(in, 0)
		end := skipValue(in, start, 0)
		if end < 0 {
			if json.Valid(in) && depth(in) <= maxScanDepth {
				t.Fatalf("skipValue(%q) refused a valid value", in)
			}
			return
		}
		if !json.Valid(in[start:end]) {
			t.Fatalf("skipValue(%q) accepted %q, which is not valid JSON", in, in[start:end])
		}
		if rest := in[end:]; json.Valid(in) && len(bytes.TrimLeft(rest, " \t\r\n")) > 0 {
			t.Fatalf("skipValue(%q) ended at %d, before the value's end", in, end)
		}
	})
}

// depth is the deepest nesting of brackets in in, outside strings.
func depth(in []byte) int {
	d, deepest := 0, 0
	for i := 0; i < len(in); i++ {
		switch in[i] {
		case '"':
			i += stringEnd(in[i:]) - 1
		case '[', '{':
			d++
			deepest = max(deepest, d)
		case ']', '}':
			d--
		}
	}
	return deepest
}

// FuzzWriteString holds scanString and writeString to json.Unmarshal: the
// same strings valid, and each decoded to the same bytes.
func FuzzWriteString(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want string
		wantErr := json.Unmarshal(in, &want)
		end, escaped := scanString(in, 0)
		if end < 0 && wantErr == nil && len(in) > 0 && in[0] == '"' {
			t.Fatalf("scanString(%q) refused a JSON string", in)
		}
		if end != len(in) {
			return // not one string alone
		}
		if wantErr != nil {
			t.Fatalf("scanString(%q) accepted what json.Unmarshal refuses: %v", in, wantErr)
		}
		if escaped != bytes.ContainsRune(in, '\\') {
			t.Fatalf("scanString(%q) escaped = %v", in, escaped)
		}
		var b strings.Builder
		writeString(&b, in)
		if b.String() != want {
			t.Fatalf("writeString(%q) = %q, want %q", in, b.String(), want)
		}
	})
}
