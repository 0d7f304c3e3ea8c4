package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// BenchmarkRequestCodec encodes and decodes a queued request whose body is
// a conversation of 21 messages, with encoding/json and by hand.
//
//	go test -run '^$' -bench RequestCodec -benchmem ./relay/wire/
func BenchmarkRequestCodec(b *testing.B) {
	r := wire.Request{StreamID: "sbm6v2c4x3qjz7f5k1n8r9t0wa", Tenant: "acme", Model: "gpt-test", Body: relaytest.Conversation("gpt-test", 21), Created: 1764633600}
	data := r.Encode()
	b.Run("encode/encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/hand", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			r.Encode()
		}
	})
	b.Run("decode/encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var got wire.Request
			if err := json.Unmarshal(data, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/hand", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := wire.DecodeRequest(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
