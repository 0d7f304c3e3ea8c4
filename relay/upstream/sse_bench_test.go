package upstream

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// benchEvents is the number of events of a benchmark's stream: one
// answer of a thousand tokens.
const benchEvents = 1000

// benchStream is an OpenAI stream of benchEvents one-token chunks and
// [DONE], and an Anthropic one of as many text deltas.
func benchStream(anthropic bool) []byte {
	var b strings.Builder
	for range benchEvents {
		if anthropic {
			b.WriteString("event: content_block_delta\n" +
				`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}` + "\n\n")
			continue
		}
		b.WriteString("data: " + openAIChunk + "\n\n")
	}
	if !anthropic {
		b.WriteString("data: [DONE]\n\n")
	}
	return []byte(b.String())
}

// BenchmarkEventReader reads a stream of benchEvents events from memory.
func BenchmarkEventReader(b *testing.B) {
	for _, tc := range []struct {
		name      string
		anthropic bool
	}{{"openai", false}, {"anthropic", true}} {
		b.Run(tc.name, func(b *testing.B) {
			in := benchStream(tc.anthropic)
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				r := NewEventReader(bytes.NewReader(in), 0)
				for {
					if _, err := r.Next(); err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchEvents), "ns/event")
		})
	}
}

// BenchmarkStreamNext reads an OpenAI stream of benchEvents chunks as a
// worker does, through Stream.Next, the watchdog's activityReader and
// chat.ParseChunk, from a net.Pipe written in pieces of a TCP segment.
func BenchmarkStreamNext(b *testing.B) {
	in := benchStream(false)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			for rest := in; len(rest) > 0; {
				n := min(len(rest), 1448)
				if _, err := server.Write(rest[:n]); err != nil {
					return
				}
				rest = rest[n:]
			}
		}()
		ctx, cancel := context.WithCancelCause(context.Background())
		wd := startWatchdog(time.Minute, time.Minute, time.Minute, cancel)
		s := &Stream{provider: "bench", ctx: ctx, cancel: cancel, wd: wd, body: client,
			events: NewEventReader(&activityReader{client, wd}, 0)}
		for {
			if _, err := s.Next(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
		_ = s.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchEvents), "ns/event")
}

// openAIChunk is a chunk as OpenAI streams it.
const openAIChunk = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f9f4fb6dbf","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}`
