package edge

import (
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// The edge's processor time per chunk (e2e/BENCHMARKS.md, "What bounds each
// figure"): rendering a chunk's event, and writing events to a client; and
// per request: checking its body.
//
//	go test -run '^$' -bench 'RenderChunk|SSEWriteBatch|ParseChatRequest' -benchmem ./edge/

// benchChunks are a typical stream's entries: a first chunk with the role,
// a token, and the done end frame with its usage.
func benchChunks() (view, []chunklog.Entry) {
	v := view{id: "sbm6v2c4x3qjz7f5k1n8r9t0wa", meta: wire.Meta{Model: "gpt-4o-mini", Created: 1764633600}}
	chunk := wire.Frame{Kind: wire.KindChunk, Seq: 2, Content: " world", Provider: "openai", Model: "gpt-4o-mini-2024-07-18", Attempt: 1}
	first := chunk
	first.Seq, first.Role, first.Content = 1, "assistant", "Hello"
	end := wire.Frame{Kind: wire.KindEnd, Seq: 3, Status: wire.StatusDone, FinishReason: "stop", Attempts: 1, Cost: 0.000042,
		Usage: &wire.Usage{PromptTokens: 12, CompletionTokens: 2, TotalTokens: 14}}
	return v, []chunklog.Entry{{JSSeq: 101, Frame: first}, {JSSeq: 102, Frame: chunk}, {JSSeq: 103, Frame: end}}
}

// BenchmarkRenderChunk renders one chunk's event (and the done stream's
// last one) with encoding/json, as the edge did, and by hand.
func BenchmarkRenderChunk(b *testing.B) {
	v, entries := benchChunks()
	for _, c := range []struct {
		name string
		e    chunklog.Entry
	}{{"chunk", entries[1]}, {"final", entries[2]}} {
		b.Run(c.name+"/encoding-json", func(b *testing.B) {
			var out sseWriter
			for b.Loop() {
				out.event(cursorOf(c.e).String(), marshal(v.object(c.e)))
				out.buf.Reset()
			}
		})
		b.Run(c.name+"/appender", func(b *testing.B) {
			var out sseWriter
			d := chatEvents{v: v}
			for b.Loop() {
				d.frame(&out, c.e)
				out.buf.Reset()
			}
		})
	}
}

// BenchmarkSSEWriteBatch writes 8 chunk events to a client over loopback
// TCP, as a taken-over SSE response does (chunked, a write deadline per
// write): one write per event, and all 8 in one write.
func BenchmarkSSEWriteBatch(b *testing.B) {
	const frames = 8
	v, entries := benchChunks()
	chunk := entries[1]
	for _, c := range []struct {
		name  string
		batch bool
	}{{"per-frame", false}, {"batch", true}} {
		b.Run(c.name, func(b *testing.B) {
			conn := loopback(b)
			out := sseWriter{dst: &chunkedConn{conn: conn}}
			d := chatEvents{v: v}
			for b.Loop() {
				for range frames {
					d.frame(&out, chunk)
					if !c.batch {
						if err := out.flush(); err != nil {
							b.Fatal(err)
						}
					}
				}
				if c.batch {
					if err := out.flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*frames), "ns/frame")
		})
	}
}

// loopback is the client end of a TCP connection on 127.0.0.1 whose other
// end reads and drops everything.
func loopback(b *testing.B) net.Conn {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
		io.Copy(io.Discard, c)
		c.Close()
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	if <-accepted == nil {
		b.Fatal("accept failed")
	}
	b.Cleanup(func() { conn.Close() })
	return conn
}

// BenchmarkParseChatRequest checks a request body with encoding/json, as
// the edge did (decodeChatRequest), and in one pass (parseChatRequest): a
// first turn and a conversation of 21 messages.
func BenchmarkParseChatRequest(b *testing.B) {
	lim := fuzzLimits
	lim.maxMessages = -1
	for _, turns := range []int{1, 21} {
		body := relaytest.Conversation(testModel, turns)
		for _, c := range []struct {
			name  string
			parse func([]byte, limits) (chatRequest, *wire.Error)
		}{{"encoding-json", decodeChatRequest}, {"one-pass", parseChatRequest}} {
			b.Run(fmt.Sprintf("%d-messages/%s", turns, c.name), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if _, e := c.parse(body, lim); e != nil {
						b.Fatal(e)
					}
				}
			})
		}
	}
}
