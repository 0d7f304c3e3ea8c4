package upstream

import (
	"os"
	"testing"
)

// BenchmarkParseChunk measures the common case: a content-only chunk as
// OpenAI sends it, one token.
func BenchmarkParseChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f9f4fb6dbf","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseChunk(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseChunkAllFields measures a chunk with every member OpenAI's
// reference lists, reasoning and unknown members.
func BenchmarkParseChunkAllFields(b *testing.B) {
	data, err := os.ReadFile("testdata/chunk_openai_full.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseChunk(data); err != nil {
			b.Fatal(err)
		}
	}
}
