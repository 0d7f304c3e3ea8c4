package chat

import (
	"os"
	"testing"
)

// BenchmarkParseChunk measures the common case: a content-only chunk as
// OpenAI sends it, one token, read by the general path and by ParseChunk
// (which takes the fast path).
func BenchmarkParseChunk(b *testing.B) {
	benchmarkParsers(b, []byte(fastChunks[0]))
}

// BenchmarkParseChunkAllFields measures a chunk with every member OpenAI's
// reference lists, reasoning and unknown members.
func BenchmarkParseChunkAllFields(b *testing.B) {
	data, err := os.ReadFile("testdata/chunk_openai_full.json")
	if err != nil {
		b.Fatal(err)
	}
	benchmarkParsers(b, data)
}

func benchmarkParsers(b *testing.B, data []byte) {
	for _, p := range []struct {
		name  string
		parse func([]byte) (Delta, error)
	}{
		{"general", parseChunkGeneral},
		{"fast", ParseChunk},
	} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
