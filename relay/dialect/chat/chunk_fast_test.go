package chat

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/jsonscan"
)

// jsonSeeds are values at the edges of what the scanner must tell apart.
var jsonSeeds = []string{
	`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e16\ud83d\ude00"`, `"\ud83d"`, `"\ude00\ud83d"`,
	`"\ud83d\u0041"`, `"\ud83dx"`, `"\uD83D\uDE00"`, "\"\xff\xfe\xed\xa0\x80\xef\xbf\xbd\"", `"\u"`, `"\u12"`,
	`"\x"`, `"\'"`, "\"a\x01\"", `"open`, `0`, `-0`, `-`, `01`, `1.`, `1.5e`, `1.5E+10`, `-0.0e-0`, `1e5`,
	`true`, `tru`, `nul`, `null`, `false`, `[]`, `[ ]`, `[1,]`, `[,1]`, `{}`, `{ }`, `{"a":1,}`, `{"a" 1}`,
	`{"a":[{"b":null}],"c":"d"}`, `{1:2}`, `[[[[]]]]`, strings.Repeat("[", jsonscan.MaxDepth) + strings.Repeat("]", jsonscan.MaxDepth),
}

// fastChunks are chunks of the shapes the fast path is for: each must be
// taken by it, not left to the general path.
var fastChunks = []string{
	`{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f9f4fb6dbf","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
	`{"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":2}}}`,
	`{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a","tool_calls":null,"annotations":[]}}]}`,
	`{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"think"}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":"b","reasoning_content":""}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"","reasoning":"b"}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":{"effort":"low"},"content":"x","content":"y"}}]}`,
	`{"choices":[{"index":0,"delta":{"refusal":"No."},"logprobs":{"content":null,"refusal":[{"token":"No","logprob":-1.5e-3,"bytes":[78,111],"top_logprobs":[]}]}}]}`,
	"{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\\\"b\\u00e9\xff\\ud83d\\ude00\\ud83d\\u0041\\/\\b\\f\\n\\r\\t\\\\\"}}],\"x\":[1, {\"z\":\",\"}],\"x\":true}",
	" \r\n\t{ \"choices\" : [ { \"index\" : 0 , \"delta\" : null , \"stop_reason\" : null } ] , \"é\xfe\" : -0.0E+1 } \n",
	`{"choices":null,"error":null,"object":null,"model":null,"obfuscation":"pad","relay":{"seq":3,"a":[[[]]]}}`,
	`{}`,
}

// generalChunks are valid chunks the fast path must leave to the general
// one, which either reads them otherwise or reports an error.
var generalChunks = []string{
	`{"choices":[{"index":1,"delta":{"content":"one"}},{"index":0,"delta":{"content":"zero"}}]}`,
	`{"choices":[{"index":2,"delta":{"content":"two"}}]}`,
	`{"choices":[{"delta":{"content":[{"type":"text","text":"a"}]}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a"},"delta":{"role":"assistant"}}]}`,
	`{"choices":[],"choices":[{"delta":{"content":"a"}}]}`,
	`{"usage":{"prompt_tokens":1},"usage":null}`,
	`{"error":{"message":"m","code":1}}`,
	`{"object":"error","message":"m"}`,
	`{"object":"err\u006fr","message":"m"}`,
	`{"mod\u0065l":"m"}`,
	`{"usage":{"prompt_tokens":"3"}}`,
	`{"choices":[{"index":0,"delta":{"content":5}}]}`,
	`{"choices":[{"index":0,"finish_reason":1}]}`,
	"\u00a0{}",
	`{"choices":[{"index":0}]} x`,
	`{"a":` + strings64(`[`) + strings64(`]`) + `}`,
}

// strings64 is s repeated one more time than the fast path nests.
func strings64(s string) string { return string(bytes.Repeat([]byte(s), jsonscan.MaxDepth+1)) }

func TestParseChunkFastTakesCommonShapes(t *testing.T) {
	full, err := os.ReadFile("testdata/chunk_openai_full.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range append(fastChunks, string(full)) {
		var got Delta
		if !parseChunkFast([]byte(in), &got) {
			t.Errorf("parseChunkFast(%q) left it to the general path", in)
			continue
		}
		want, err := parseChunkGeneral([]byte(in))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseChunkFast(%q) =\n %+v\nparseChunkGeneral =\n %+v, %v", in, got, want, err)
		}
	}
}

// TestParseChunkFastForgetsTheChunkBefore parses each common chunk right
// after each other one, so that the parse state recycled between them
// (fastChunkPool) is the one the chunk before left, and holds it to what
// the general path reads.
func TestParseChunkFastForgetsTheChunkBefore(t *testing.T) {
	for _, before := range fastChunks {
		for _, in := range fastChunks {
			parseChunkFast([]byte(before), new(Delta))
			var got Delta
			if !parseChunkFast([]byte(in), &got) {
				t.Errorf("parseChunkFast(%q) after %q left it to the general path", in, before)
				continue
			}
			if want, err := parseChunkGeneral([]byte(in)); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("parseChunkFast(%q) after %q =\n %+v\nparseChunkGeneral =\n %+v, %v", in, before, got, want, err)
			}
		}
	}
}

func TestParseChunkFastLeavesTheRest(t *testing.T) {
	for _, in := range generalChunks {
		if d := (Delta{}); parseChunkFast([]byte(in), &d) {
			t.Errorf("parseChunkFast(%q) = %+v, want it left to the general path", in, d)
		}
	}
}

// TestParseChunkFastAllocs holds the common chunk to its two allocations:
// its text, and service_tier's value with its Field.
func TestParseChunkFastAllocs(t *testing.T) {
	data := []byte(fastChunks[0])
	if n := testing.AllocsPerRun(100, func() { _ = parseChunkFast(data, new(Delta)) }); n > 3 {
		t.Errorf("parseChunkFast allocates %v times, want at most 3", n)
	}
}

// FuzzParseChunkFast checks that whatever the fast path takes, it reads as
// the general path does: the same Delta, and no error where there is none.
// Each input is also tried as the value of the members the fast path
// reads, so that mutations land where it decodes.
func FuzzParseChunkFast(f *testing.F) {
	for _, in := range append(append(fastChunks, generalChunks...), chunkFiles(f)...) {
		f.Add([]byte(in))
	}
	for _, v := range jsonSeeds {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, data := range append(inMembers(in), in) {
			var got Delta
			ok := parseChunkFast(data, &got)
			want, err := parseChunkGeneral(data)
			if ok && (err != nil || !reflect.DeepEqual(got, want)) {
				t.Fatalf("parseChunkFast(%q) =\n %#v\nparseChunkGeneral =\n %#v, %v", data, got, want, err)
			}
			pub, pubErr := ParseChunk(data)
			if (pubErr == nil) != (err == nil) || !reflect.DeepEqual(pub, want) {
				t.Fatalf("ParseChunk(%q) = %#v, %v\nwant %#v, %v", data, pub, pubErr, want, err)
			}
		}
	})
}

// inMembers returns chunks with v as the value of the members the fast
// path reads as text, of those it keeps raw, of usage, and as the name and
// value of an unknown member.
func inMembers(v []byte) [][]byte {
	var chunks [][]byte
	for _, c := range []string{
		`{"model":V,"system_fingerprint":V,"choices":[{"finish_reason":V,"delta":{"role":V,"content":V,"refusal":V,"reasoning":V,"reasoning_content":V}}]}`,
		`{"x":V,"choices":[{"index":0,"logprobs":V,"y":V,"delta":{"tool_calls":V,"annotations":V,"z":V,"reasoning":V}}]}`,
		`{"choices":[],"usage":V}`,
		`{"choices":[{"delta":{V:V}}]}`,
	} {
		chunks = append(chunks, bytes.ReplaceAll([]byte(c), []byte("V"), v))
	}
	return chunks
}

// chunkFiles returns the chunks of testdata: the JSON files, and the data
// lines of the SSE files.
func chunkFiles(tb testing.TB) []string {
	tb.Helper()
	names, err := filepath.Glob("testdata/*")
	if err != nil {
		tb.Fatal(err)
	}
	var chunks []string
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		if filepath.Ext(name) == ".json" {
			chunks = append(chunks, string(b))
			continue
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				chunks = append(chunks, string(data))
			}
		}
	}
	return chunks
}
