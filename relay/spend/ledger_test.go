package spend_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/spend"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// Many streams ending at once on several workers, each stream's end
// observed twice (by the job that ended it and by a redelivery that found
// it ended, on another worker), are each counted exactly once: in the
// ledger, and in the sums of a Tally following it live and of one that
// starts after the fact and reads it from the beginning.
func TestLedgerCountsEachStreamOnceUnderConcurrency(t *testing.T) {
	srv := relaytest.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	t.Cleanup(func() { cancel(); runs.Wait() })
	live := spend.NewTally(nil)
	runs.Go(func() { live.Run(ctx, ledgerOn(t, srv), relaytest.Logger(t)) })
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, live.Ready)

	const workers, streamsN = 4, 300
	now := time.Now()
	type scope struct{ tenant, key string }
	scopes := []scope{{"acme", "k1"}, {"acme", "k2"}, {"beta", "k3"}}
	want := map[scope]spend.Totals{}
	records := make([]spend.Record, streamsN)
	for i := range records {
		s := scopes[i%len(scopes)]
		usage := &wire.Usage{PromptTokens: i, CompletionTokens: 7, TotalTokens: i + 7}
		records[i] = spend.NewRecord(s.tenant, s.key, now, usage, 0.25)
		want[s] = want[s].Add(records[i].Totals())
	}

	var counted [streamsN]atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		kv := ledgerOn(t, srv)
		wg.Go(func() {
			// Worker w ends the streams i with i%workers == w and finds
			// those of worker w+1 ended, in an order of its own.
			for n := range 2 * streamsN / workers {
				i := (n/2)*workers + (w+n%2)%workers
				ok, err := spend.Store(ctx, kv, fmt.Sprintf("stream%04d", i), records[i])
				if err != nil {
					t.Errorf("worker %d, stream %d: %v", w, i, err)
					return
				}
				if ok {
					counted[i].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for i := range counted {
		if n := counted[i].Load(); n != 1 {
			t.Fatalf("stream %d counted %d times, want once", i, n)
		}
	}

	late := spend.NewTally(nil)
	runs.Go(func() { late.Run(ctx, ledgerOn(t, srv), relaytest.Logger(t)) })
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, late.Ready)
	for _, tally := range []*spend.Tally{live, late} {
		relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
			return tally.Key("beta", "k3", now).Month == want[scope{"beta", "k3"}]
		})
		for s, tot := range want {
			if got := tally.Key(s.tenant, s.key, now); got.Day != tot || got.Month != tot {
				t.Errorf("%v: %+v, want %+v in the day and the month", s, got, tot)
			}
		}
		acme := want[scope{"acme", "k1"}].Add(want[scope{"acme", "k2"}])
		if got := tally.Tenant("acme", now).Month; got.Tokens != acme.Tokens {
			t.Errorf("tenant acme: %d tokens, want %d", got.Tokens, acme.Tokens)
		}
	}
}

// A stream that used nothing is not recorded.
func TestLedgerSkipsEmptyRecords(t *testing.T) {
	_, js := relaytest.Connect(t, relaytest.NATS(t), streams.Topology{MemoryStorage: true})
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, wire.UsageBucket)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := spend.Store(ctx, kv, "s1", spend.NewRecord("acme", "k", time.Now(), nil, 0))
	if ok || err != nil {
		t.Fatalf("Store of nothing = %v, %v", ok, err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		t.Errorf("key %s stored", k)
	}
}

// ledgerOn opens the usage ledger on srv over a connection of its own, as
// one more node would.
func ledgerOn(t *testing.T, srv *server.Server) jetstream.KeyValue {
	t.Helper()
	_, js := relaytest.Connect(t, srv, streams.Topology{MemoryStorage: true})
	kv, err := js.KeyValue(context.Background(), wire.UsageBucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}
