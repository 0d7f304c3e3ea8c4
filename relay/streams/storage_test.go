package streams_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// Every stream and bucket Setup makes has a byte limit, the configured one
// or the default, so no tenant can fill the server's disk; RELAY_REQUESTS
// at its limit refuses a new request with an error IsStorageFull
// recognizes, and RELAY_CHUNKS at its limit drops its oldest frames
// instead of refusing a generation in flight.
func TestSetupBoundsEveryStreamAndBucket(t *testing.T) {
	top := streams.Topology{MemoryStorage: true, Storage: streams.StorageLimits{Requests: 1, Chunks: -1, Metadata: 2}}
	_, js := relaytest.Connect(t, relaytest.NATS(t), top)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	const mib = 1 << 20
	want := map[string]int64{
		wire.RequestStream: 1 * mib,
		wire.ChunkStream:   -1,
		wire.ChunkStreamName(wire.DurablePartition(0)): streams.DefaultDurableMiB * mib,
		"KV_" + wire.MetaBucket:                        2 * mib,
		"KV_" + wire.IdempotencyBucket:                 streams.DefaultIdempotencyMiB * mib,
		"KV_" + wire.KeyBucket:                         mib,
		"KV_" + wire.HandoverBucket:                    streams.DefaultStateMiB * mib,
		"KV_" + wire.HealthBucket:                      streams.DefaultStateMiB * mib,
		"KV_" + wire.BreakerBucket:                     streams.DefaultStateMiB * mib,
		"KV_" + wire.PauseBucket:                       streams.DefaultStateMiB * mib,
		"KV_" + wire.QuotaBucket:                       streams.DefaultStateMiB * mib,
		"KV_" + wire.CanaryBucket:                      streams.DefaultStateMiB * mib,
		"KV_" + wire.LeaseBucket:                       streams.DefaultStateMiB * mib,
		"KV_" + wire.AnswerBucket:                      streams.DefaultAnswersMiB * mib,
		"KV_" + wire.UsageBucket:                       streams.DefaultUsageMiB * mib,
	}
	names := js.StreamNames(ctx)
	seen := 0
	for name := range names.Name() {
		seen++
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.CachedInfo().Config
		if limit, ok := want[name]; !ok || cfg.MaxBytes != limit {
			t.Errorf("stream %s: max bytes %d, want %d (known: %v)", name, cfg.MaxBytes, limit, ok)
		}
	}
	if seen != len(want) {
		t.Errorf("Setup made %d streams, the test knows %d", seen, len(want))
	}

	// Fill RELAY_REQUESTS: 100 KiB requests, nobody pulling them.
	body := bytes.Repeat([]byte("x"), 100<<10)
	var full error
	for i := 0; i < 20 && full == nil; i++ {
		_, full = js.Publish(ctx, wire.RequestSubject, body)
	}
	if full == nil {
		t.Fatal("RELAY_REQUESTS took 2 MiB with a 1 MiB limit")
	}
	if !streams.IsStorageFull(full) {
		t.Fatalf("a publish into a full RELAY_REQUESTS failed with %v, which IsStorageFull does not recognize", full)
	}
	if streams.IsStorageFull(jetstream.ErrStreamNotFound) || streams.IsStorageFull(context.DeadlineExceeded) {
		t.Fatal("IsStorageFull recognizes errors that are not about storage")
	}

	// RELAY_CHUNKS with a limit drops the oldest frames.
	top.Storage.Chunks = 1
	_, js = relaytest.Connect(t, relaytest.NATS(t), top)
	for i := 0; i < 20; i++ {
		if _, err := js.Publish(ctx, wire.ChunkSubject("s"+strings.Repeat("a", i%3)), body); err != nil {
			t.Fatalf("frame %d into RELAY_CHUNKS at its limit: %v", i, err)
		}
	}
	st, err := js.Stream(ctx, wire.ChunkStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Bytes > mib || info.State.FirstSeq == 1 {
		t.Fatalf("RELAY_CHUNKS holds %d bytes from sequence %d: the oldest frames were not dropped", info.State.Bytes, info.State.FirstSeq)
	}
}
