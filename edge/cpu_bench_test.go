package edge

import (
	"io"
	"net"
	"testing"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// The edge's processor time per chunk (e2e/BENCHMARKS.md, "What bounds each
// figure"): rendering a chunk's event and checking a request's body
// (relay/dialect/chat's BenchmarkRenderChunk and BenchmarkCheckRequest),
// and writing events to a client, here.
//
//	go test -run '^$' -bench 'RenderChunk|CheckRequest' -benchmem ./relay/dialect/chat/
//	go test -run '^$' -bench 'SSEWriteBatch' -benchmem ./edge/

// BenchmarkSSEWriteBatch writes 8 chunk events to a client over loopback
// TCP, as a taken-over SSE response does (chunked, a write deadline per
// write): one write per event, and all 8 in one write.
func BenchmarkSSEWriteBatch(b *testing.B) {
	const frames = 8
	s := chat.Stream{ID: "sbm6v2c4x3qjz7f5k1n8r9t0wa", Meta: wire.Meta{Model: "gpt-4o-mini", Created: 1764633600}, Cursors: fixedCursorKey}
	chunk := chunklog.Entry{JSSeq: 102, Frame: wire.Frame{Kind: wire.KindChunk, Seq: 2, Content: " world", Provider: "openai", Model: "gpt-4o-mini-2024-07-18", Attempt: 1}}
	for _, c := range []struct {
		name  string
		batch bool
	}{{"per-frame", false}, {"batch", true}} {
		b.Run(c.name, func(b *testing.B) {
			conn := loopback(b)
			out := sseWriter{dst: &chunkedConn{conn: conn}}
			d := chatEvents{s: s}
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
