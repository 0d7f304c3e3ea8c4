package spend_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/spend"
	"github.com/relaydev/relay/relay/wire"
)

var errFull = errors.New("budget taken")

// Reservations made at once from several connections (several edges) are
// serialized: the holds admitted while what is held stays under a limit
// add up to less than the limit plus one hold. A hold stops counting once
// the tally sees its request's record, whose cost counts instead, and a
// released or expired hold counts nothing.
func TestReserveSerializesAcrossNodes(t *testing.T) {
	srv := relaytest.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	t.Cleanup(func() { cancel(); runs.Wait() })
	tally := spend.NewTally(func(tenant string) bool { return tenant == "acme" })
	kv0 := ledgerOn(t, srv)
	runs.Go(func() { tally.Run(ctx, kv0, relaytest.Logger(t)) })
	if !tally.WaitReady(ctx) {
		t.Fatal("tally not ready")
	}

	const limit, cost, nodes, tries = 1000, 30, 4, 50
	scope := spend.TenantScope("acme")
	hold := spend.Hold{Tokens: cost, Expires: time.Now().Add(time.Hour).Unix()}
	under := func(held spend.Totals) error {
		if held.Tokens >= limit {
			return errFull
		}
		return nil
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for n := range nodes {
		kv := ledgerOn(t, srv)
		wg.Go(func() {
			for i := range tries {
				err := spend.Reserve(ctx, kv, tally, scope, fmt.Sprintf("r%d-%d", n, i), hold, under)
				switch {
				case err == nil:
					admitted.Add(1)
				case !errors.Is(err, errFull):
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got, most := admitted.Load()*cost, int64(limit+cost); got > most || got < limit {
		t.Fatalf("%d tokens held against a limit of %d; want at least the limit and at most %d", got, limit, most)
	}

	held := func() int64 {
		var h spend.Totals
		err := spend.Reserve(ctx, kv0, tally, scope, "probe", hold, func(x spend.Totals) error { h = x; return errFull })
		if !errors.Is(err, errFull) {
			t.Fatal(err)
		}
		return h.Tokens
	}
	before := held()
	// Request r0-0's real cost is recorded: its hold stops counting.
	r := spend.NewRecord("acme", "k", time.Now(), &wire.Usage{TotalTokens: 5}, 0)
	if _, err := spend.Store(ctx, kv0, "r0-0", r); err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool { return held() == before-cost })
	// A released hold counts nothing.
	if err := spend.Release(ctx, kv0, tally, scope, "r0-1"); err != nil {
		t.Fatal(err)
	}
	if got := held(); got != before-2*cost {
		t.Errorf("after a release %d held, want %d", got, before-2*cost)
	}
	// An expired hold counts nothing.
	other := spend.KeyScope("acme", "k")
	expired := spend.Hold{Tokens: limit, Expires: time.Now().Add(-time.Second).Unix()}
	if err := spend.Reserve(ctx, kv0, tally, other, "old", expired, under); err != nil {
		t.Fatal(err)
	}
	if err := spend.Reserve(ctx, kv0, tally, other, "new", hold, under); err != nil {
		t.Errorf("an expired hold still counts: %v", err)
	}
}
