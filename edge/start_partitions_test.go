package edge

import (
	"context"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// New streams are spread evenly over the partitions the assets record,
// generations over theirs and Durable Streams over theirs, each kind in
// its own turn, and a new count reaches new streams once the one known is
// old.
func TestNewStreamsTakeThePartitionsInTurn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newEnv(t)
	if err := streams.Setup(ctx, e.js, streams.Topology{MemoryStorage: true, Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	p := newPartitions(e.js)
	count := func(n int) map[int]int {
		got := map[int]int{}
		for range n {
			id := p.newStreamID(ctx)
			if !wire.ValidStreamID(id) {
				t.Fatalf("invalid id %q", id)
			}
			got[wire.Partition(id)]++
		}
		return got
	}
	if got := count(30); len(got) != 3 || got[0] != 10 || got[1] != 10 || got[2] != 10 {
		t.Fatalf("30 new streams by partition: %v, want 10 in each of 3", got)
	}
	durable := map[int]int{}
	for i := range 30 {
		durable[p.nextDurable(ctx)]++
		if i%3 == 0 {
			p.newStreamID(ctx) // generations in between take nothing from Durable Streams' turn
		}
	}
	if len(durable) != 3 || durable[0] != 10 || durable[1] != 10 || durable[2] != 10 {
		t.Fatalf("30 new Durable Streams by partition: %v, want 10 in each of 3", durable)
	}

	if err := streams.Setup(ctx, e.js, streams.Topology{MemoryStorage: true, Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	if got := count(4); len(got) != 3 {
		t.Fatalf("the count known was read again before it was old: %v", got)
	}
	p.at.Store(time.Now().Add(-partitionsRead - time.Second).UnixNano())
	if got := count(20); len(got) != 2 || got[0] != 10 || got[1] != 10 {
		t.Fatalf("20 new streams by partition after the count went to 2: %v, want 10 in each of 2", got)
	}
}
