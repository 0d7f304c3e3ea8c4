package upstream

import (
	"bytes"
	"reflect"
	"testing"
)

// scanCases are chunks scanChunk must decode itself (true) or leave to
// encoding/json (false).
var scanCases = []struct {
	in      string
	handled bool
}{
	{openAIChunk(`{"role":"assistant","content":"","refusal":null}`, "null"), true},
	{openAIChunk(`{"content":" world"}`, "null"), true},
	{openAIChunk(`{}`, `"stop"`), true},
	{chunkData("hi", ""), true},
	{`{"model":"m","choices":[{"index":1,"delta":{"content":"one"}},{"index":0,"delta":{"content":"zero"}}]}`, true},
	{`{"choices":[{"index":0,"delta":{"content":"a\n\"b\" \u00e9 \ud83d\ude80 \ud800"}}]}`, true},
	{"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xff\xfe 世界\"}}]}", true},
	{` {"x":[1,-2.5e+3,0.1E2,true,false,null,{"y":"\/"}],"usage":null,"error":null,"choices":null} `, true},
	{`{"choices":[{"index":0,"delta":null,"finish_reason":null}]}`, true},
	{`{}`, true},
	{"{ \"model\" : \"m\" ,\n\t\"choices\" : [ { \"index\" : 0 , \"delta\" : { \"content\" : \"x\" } } ] }", true},
	{`{"Model":"m"}`, false},
	{`{"model":"a","model":"b"}`, false},
	{`{"mod\u0065l":"m"}`, false},
	{`{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"a"}]}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]}}]}`, false},
	{`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`, false},
	{`{"error":{"message":"m"}}`, false},
	{`{"object":"error","message":"m"}`, false},
	{`{"choices":[{"index":1.0}]}`, false},
	{`{"choices":[{"index":01}]}`, false},
	{`{"choices":[null]}`, false},
	{`{"created":01}`, false},
	{`{"x":"\x"}`, false},
	{"{\"x\":\"\t\"}", false},
	{`{"x":1} x`, false},
	{`{"x":nul}`, false},
	{`{"x":[1,]}`, false},
	{`{"x":1,}`, false},
}

func TestScanChunk(t *testing.T) {
	for _, tc := range scanCases {
		got, ok := scanChunk([]byte(tc.in), "")
		if ok != tc.handled {
			t.Errorf("scanChunk(%s) handled = %v, want %v", tc.in, ok, tc.handled)
			continue
		}
		if !ok {
			continue
		}
		want, err := decodeChunk([]byte(tc.in))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("scanChunk(%s) = %+v; encoding/json: %+v, %v", tc.in, got, want, err)
		}
	}
}

// FuzzScanChunk checks that whatever scanChunk decodes, encoding/json
// decodes the same.
func FuzzScanChunk(f *testing.F) {
	for _, tc := range scanCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		in = bytes.TrimSpace(in)
		got, ok := scanChunk(in, "m")
		if !ok {
			return
		}
		want, err := decodeChunk(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("scanChunk(%q) = %+v; encoding/json: %+v, %v", in, got, want, err)
		}
	})
}
