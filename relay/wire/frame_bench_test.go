package wire

import (
	"testing"
)

// tokenChunk is a typical chunk frame: one token of a chat answer.
var tokenChunk = Frame{Kind: KindChunk, Seq: 42, Content: " world", Provider: "openai", Model: "gpt-4o-mini", Attempt: 1, Tokens: 1}

// BenchmarkFrameEncode compares Encode with json.Marshal on tokenChunk.
func BenchmarkFrameEncode(b *testing.B) {
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tokenChunk.Encode()
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			encodeJSON(tokenChunk)
		}
	})
}

// BenchmarkDecodeFrame compares DecodeFrame with json.Unmarshal on
// tokenChunk.
func BenchmarkDecodeFrame(b *testing.B) {
	data := tokenChunk.Encode()
	for _, c := range []struct {
		name   string
		decode func([]byte) (Frame, error)
	}{{"hand", DecodeFrame}, {"encoding_json", decodeJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := c.decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
