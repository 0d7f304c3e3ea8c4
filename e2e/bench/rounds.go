package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// rounds measures what nats-server spends on a stored message when it
// arrives alone and when it arrives with others. Each message a stream's
// leader receives alone is a write of its own and, on a replicated
// stream, a raft round of its own (appended, sent to the followers,
// acknowledged, applied: a wake-up on every server); messages that arrive
// together share one. A worker appends each stream's frames one at a
// time (a replicated stream refuses pipelined appends to one subject,
// error 10164), so at a token's pace its appends come one by one, and
// what they cost the servers is the figure "CPU per delivered chunk"
// carries, whatever the relay does around them.
//
// Three ways of writing the same messages (as large as a one-token
// frame) into a scratch stream with the relay's replica count, in turn,
// roundsRuns times: one at a time (each waits for its ack), 16 in flight
// (async publish), and 40 streams writing one message every 20 ms each
// (a worker's appends at 50 tokens/s), each stream one at a time. Then
// the same for a worker's progress reports on the requests it holds
// (progressRounds).
func (b *bench) rounds(ctx context.Context) ([]figure, error) {
	const name = "BENCH_ROUNDS"
	replicas := len(b.natsProcs)
	_, err := b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{"bench.rounds.*"}, Storage: jetstream.FileStorage, Replicas: replicas,
	})
	if err != nil {
		return nil, err
	}
	defer b.js.DeleteStream(context.WithoutCancel(ctx), name)
	if err := streams.Setup(ctx, b.js, streams.Topology{}); err != nil {
		return nil, err
	}
	w := roundsWriter{js: b.js, payload: []byte(strings.Repeat("x", 114)), n: b.plan.roundsMessages, batches: &batchCount{}}
	var alone, together, paced, written, perBatch []float64
	for run := range b.plan.roundsRuns {
		for _, m := range []struct {
			into  *[]float64
			write func(context.Context) error
		}{{&alone, w.alone}, {&together, w.together}, {&paced, w.paced}, {&written, w.asAWorker}} {
			cpu := meterParts([]part{{"nats", b.natsCPUClocks()}})
			if err := m.write(ctx); err != nil {
				return nil, fmt.Errorf("rounds: %w", err)
			}
			*m.into = append(*m.into, float64(cpu.used()[0].Microseconds())/float64(w.n))
		}
		perBatch = append(perBatch, w.batches.mean())
		b.log.printf("  rounds, run %d: nats-server µs per message: alone %.0f, 16 in flight %.0f, 40 streams at 50/s %.0f, as a worker writes them %.0f (%.1f frames a batch)", run+1, alone[run], together[run], paced[run], written[run], perBatch[run])
	}
	progTogether, progSpread, held, err := b.progressRounds(ctx)
	if err != nil {
		return nil, fmt.Errorf("rounds: progress reports: %w", err)
	}
	b.log.printf("  rounds: nats-server µs per progress report, %d held: together %v, spread %v", held, progTogether, progSpread)
	servers := fmt.Sprintf("%d nats-server(s), file storage, R%d; %d messages of 114 bytes per way and run, the ways in turn, %d runs; processor time of every server", replicas, replicas, w.n, b.plan.roundsRuns)
	base := "16 in flight (async publish)"
	figs := []figure{
		{Name: "nats-server CPU per stored message, written one at a time", Unit: "µs",
			Relay: ptr(summarize(alone)), Baseline: ptr(summarize(together)), BaselineName: base, Goal: "report", Note: servers, rank: rankRounds},
		{Name: "nats-server CPU per stored message, 40 streams writing one every 20 ms each (a worker's appends at 50 tokens/s)", Unit: "µs",
			Relay: ptr(summarize(paced)), Baseline: ptr(summarize(together)), BaselineName: base, Goal: "report",
			Note: "each stream waits for its message's ack before the next, as a worker's appends to one stream do; " + servers, rank: rankRounds},
		{Name: "nats-server CPU per stored message, 40 streams at 50 tokens/s as a worker writes them", Unit: "µs",
			Relay: ptr(summarize(written)), Baseline: ptr(summarize(together)), BaselineName: base, Goal: "report",
			Note: fmt.Sprintf("one-token chunk frames fenced in the chunk log by the worker's writers, %s (frames a batch, by run: %.1f); each stream's claim and first chunk are among the messages and go alone; %s", commitNote(replicas), perBatch, servers), rank: rankRounds},
		{Name: fmt.Sprintf("nats-server CPU per progress report, %d requests held, each reported once a second, spread over it", held), Unit: "µs",
			Relay: ptr(summarize(progSpread)), Baseline: ptr(summarize(progTogether)), BaselineName: "all in one burst", Goal: "report",
			Note: fmt.Sprintf("an InProgress ack of a request held by a worker, as its own timer sends it, against all of them at once; a work queue and its consumer with the relay's replica count (R%d); the servers' processor time in a second without reports taken off; %d runs, each way in turn", replicas, b.plan.roundsRuns), rank: rankRounds},
	}
	for i := range figs {
		figs[i].compare()
	}
	return figs, nil
}

// natsCPUClocks are the nats-servers every phase shares, as clocks.
func (b *bench) natsCPUClocks() []cpuClock {
	var out []cpuClock
	for _, p := range b.natsParts() {
		out = append(out, p)
	}
	return out
}

// roundsWriter writes n messages into the rounds stream, one way or
// another.
type roundsWriter struct {
	js      jetstream.JetStream
	payload []byte
	n       int
	// batches counts the committer's batches of asAWorker.
	batches *batchCount
}

// batchCount counts batches and the frames in them.
type batchCount struct{ frames, sent atomic.Int64 }

// mean is the mean frames per batch since the last call, 0 without any.
func (b *batchCount) mean() float64 {
	sent := b.sent.Swap(0)
	if sent == 0 {
		return 0
	}
	return float64(b.frames.Swap(0)) / float64(sent)
}

func (w roundsWriter) subject(i int) string { return fmt.Sprintf("bench.rounds.s%d", i%64) }

// alone writes each message after the previous one's ack.
func (w roundsWriter) alone(ctx context.Context) error {
	for i := range w.n {
		if _, err := w.js.Publish(ctx, w.subject(i), w.payload); err != nil {
			return err
		}
	}
	return nil
}

// together keeps 16 messages in flight.
func (w roundsWriter) together(ctx context.Context) error {
	for i := range w.n {
		if _, err := w.js.PublishAsync(w.subject(i), w.payload); err != nil {
			return err
		}
		if i%16 == 15 || i == w.n-1 {
			select {
			case <-w.js.PublishAsyncComplete():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// paced has 40 streams write a message every 20 ms each, the streams'
// first messages spread over the first 20 ms, until n are written.
func (w roundsWriter) paced(ctx context.Context) error {
	return pace(ctx, w.n, func(ctx context.Context, s int) func(context.Context) error {
		subject := w.subject(s)
		return func(ctx context.Context) error {
			_, err := w.js.Publish(ctx, subject, w.payload)
			return err
		}
	})
}

// asAWorker is paced with the messages a worker's writers append to the
// chunk log: each stream a claim, then one-token chunks, fenced, through
// one committer on a replicated stream (chunklog.Batches).
func (w roundsWriter) asAWorker(ctx context.Context) error {
	info, err := w.js.Stream(ctx, wire.ChunkStream)
	if err != nil {
		return err
	}
	r := chunklog.NewReader(w.js.Conn(), "")
	newWriter := func(id string) *chunklog.Writer { return chunklog.NewWriter(w.js, r, id, 0, 0) }
	if chunklog.Batches(info.CachedInfo().Config) {
		c := chunklog.NewCommitter(w.js.Conn(), nil, func(frames int) {
			w.batches.frames.Add(int64(frames))
			w.batches.sent.Add(1)
		})
		newWriter = func(id string) *chunklog.Writer { return c.NewWriter(w.js, r, id, 0, 0) }
	}
	frame := wire.Frame{Kind: wire.KindChunk, Content: strings.Repeat("x", 8), Provider: "mock", Model: "mock-1", Attempt: 1}
	return pace(ctx, w.n, func(ctx context.Context, s int) func(context.Context) error {
		cw := newWriter(wire.NewStreamID())
		claimed := false
		return func(ctx context.Context) error {
			f := frame
			if !claimed {
				f, claimed = wire.Frame{Kind: wire.KindClaim, Worker: "bench"}, true
			}
			_, err := cw.Append(ctx, f)
			return err
		}
	})
}

// commitNote says how a worker's writers append on replicas.
func commitNote(replicas int) string {
	if replicas > 1 {
		return fmt.Sprintf("grouped into atomic batches by one committer, one batch in flight, lingering up to %v", chunklog.Linger)
	}
	return "each alone (one server: no batches)"
}

// pace has 40 streams write a message every 20 ms each, the streams'
// first messages spread over the first 20 ms, until n are written; open
// makes stream s's writer.
func pace(ctx context.Context, n int, open func(ctx context.Context, s int) func(context.Context) error) error {
	const streams, every = 40, 20 * time.Millisecond
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for s := range streams {
		count := n / streams
		if s < n%streams {
			count++
		}
		write := open(ctx, s)
		wg.Go(func() {
			next := time.Now().Add(every * time.Duration(s) / streams)
			for range count {
				t := time.NewTimer(time.Until(next))
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					errs <- ctx.Err()
					return
				}
				if err := write(ctx); err != nil {
					errs <- err
					return
				}
				next = next.Add(every)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// progressRounds measures what nats-server spends on a progress report
// (an InProgress ack) of a request held by a worker: held requests of a
// replicated work queue, each reported once a second for a second, all in
// one burst and then each at its own moment, spread over the second, in
// turn, roundsRuns times. The servers' processor time while no report is
// sent, as long, is taken off both.
func (b *bench) progressRounds(ctx context.Context) (together, spread []float64, held int, err error) {
	const name = "BENCH_PROGRESS"
	replicas := len(b.natsProcs)
	s, err := b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{"bench.progress"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: replicas,
	})
	if err != nil {
		return nil, nil, 0, err
	}
	defer b.js.DeleteStream(context.WithoutCancel(ctx), name)
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxAckPending: -1, Replicas: replicas,
	})
	if err != nil {
		return nil, nil, 0, err
	}
	n := b.plan.progressHeld
	for range n {
		if _, err := b.js.PublishAsync("bench.progress", []byte("request")); err != nil {
			return nil, nil, 0, err
		}
	}
	select {
	case <-b.js.PublishAsyncComplete():
	case <-ctx.Done():
		return nil, nil, 0, ctx.Err()
	}
	msgs := make([]jetstream.Msg, 0, n)
	for len(msgs) < n {
		batch, err := c.Fetch(n-len(msgs), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, nil, 0, err
		}
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if batch.Error() != nil {
			return nil, nil, 0, batch.Error()
		}
	}
	clocks := b.natsCPUClocks()
	perReport := func(send func()) float64 {
		idle := meterParts([]part{{"nats", clocks}})
		time.Sleep(time.Second)
		quiet := idle.used()[0]
		busy := meterParts([]part{{"nats", clocks}})
		send()
		return float64((busy.used()[0] - quiet).Microseconds()) / float64(n)
	}
	for range b.plan.roundsRuns {
		together = append(together, perReport(func() {
			start := time.Now()
			for _, m := range msgs {
				m.InProgress()
			}
			time.Sleep(time.Until(start.Add(time.Second)))
		}))
		spread = append(spread, perReport(func() {
			start := time.Now()
			for i, m := range msgs {
				time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(n))))
				m.InProgress()
			}
			time.Sleep(time.Until(start.Add(time.Second)))
		}))
	}
	return together, spread, n, nil
}

// roundMessages is how many messages storeRound times.
const roundMessages = 200

// storeRound times the round trip of a message stored alone: published
// into a scratch stream with the relay's replica count, waiting for its
// ack before the next, as a stream's claim or first chunk is. In ms.
func (b *bench) storeRound(ctx context.Context) (dist, error) {
	const name = "BENCH_ROUND"
	_, err := b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{"bench.round"}, Storage: jetstream.FileStorage, Replicas: len(b.natsProcs),
	})
	if err != nil {
		return dist{}, fmt.Errorf("round trip: %w", err)
	}
	defer b.js.DeleteStream(context.WithoutCancel(ctx), name)
	payload := []byte(strings.Repeat("x", 114))
	took := make([]float64, 0, roundMessages)
	for range roundMessages {
		start := time.Now()
		if _, err := b.js.Publish(ctx, "bench.round", payload); err != nil {
			return dist{}, fmt.Errorf("round trip: %w", err)
		}
		took = append(took, float64(time.Since(start))/float64(time.Millisecond))
	}
	return summarize(took), nil
}
