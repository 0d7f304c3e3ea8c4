package chunklog_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// BenchmarkAppend stores chunk frames as a loaded worker does, many
// streams at once (each goroutine its own stream, one frame in flight
// each), through jetstream's PublishMsg as Append used to, and through
// Append. Besides ns/op it reports cpu-ns/op, the process's CPU time per
// frame: the server runs in the process too (with memory storage, to keep
// its share small), and does the same work in both, so the difference is
// the client's.
func BenchmarkAppend(b *testing.B) {
	nc, js := relaytest.Connect(b, relaytest.NATS(b), streams.Topology{MemoryStorage: true})
	r := chunklog.NewReader(nc, "")
	frame := wire.Frame{Kind: wire.KindChunk, Content: " a token", Attempt: 1}
	run := func(b *testing.B, stream func() func(context.Context) error) {
		b.SetParallelism(50)
		b.ReportAllocs()
		cpu := cpuTime()
		b.RunParallel(func(pb *testing.PB) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			appendOne := stream()
			for pb.Next() {
				if err := appendOne(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	}
	b.Run("jetstream", func(b *testing.B) {
		run(b, func() func(context.Context) error {
			subject := wire.ChunkSubject(wire.NewStreamID())
			f, last := frame, uint64(0)
			return func(ctx context.Context) error {
				f.Seq++
				ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: f.Encode()}, jetstream.WithExpectLastSequencePerSubject(last))
				if err == nil {
					last = ack.Sequence
				}
				return err
			}
		})
	})
	b.Run("append", func(b *testing.B) {
		run(b, func() func(context.Context) error {
			w := chunklog.NewWriter(js, r, wire.NewStreamID(), 0, 0)
			return func(ctx context.Context) error {
				_, err := w.Append(ctx, frame)
				return err
			}
		})
	})
}

// cpuTime is the CPU time the process has used, user and system, in ns.
func cpuTime() int64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		panic(err)
	}
	return u.Utime.Nano() + u.Stime.Nano()
}
