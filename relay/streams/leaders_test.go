package streams_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// leaderOf is the leader of a stream, "" while it has none (its info
// then may not be answered at all: each look is bounded).
func leaderOf(t *testing.T, ctx context.Context, js jetstream.JetStream, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return ""
	}
	if c := s.CachedInfo().Cluster; c != nil {
		return c.Leader
	}
	return ""
}

// TestSpreadLeadersGivesEachServerAPartition: three partitions of
// generations and three of Durable Streams, all led by one server of
// three, end up with one partition of each kind led by each server, one
// move at a time, and once they are, SpreadLeaders moves nothing.
func TestSpreadLeadersGivesEachServerAPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	nodes := relaytest.Cluster(t, 3)
	nc, js := relaytest.Connect(t, nodes[0], streams.Topology{})
	const n = 3
	busy := nodes[0].Name()
	// A stepdown may leave the leader where it was (see below): asked
	// again every few seconds until it moves.
	kinds := [][]string{{}, {}}
	for k := range n {
		kinds[0] = append(kinds[0], wire.ChunkStreamName(k))
		kinds[1] = append(kinds[1], wire.ChunkStreamName(wire.DurablePartition(k)))
	}
	for _, name := range slices.Concat(kinds...) {
		var asked time.Time
		relaytest.Eventually(t, time.Minute, 50*time.Millisecond, func() bool {
			switch l := leaderOf(t, ctx, js, name); {
			case l == busy:
				return true
			case l != "" && time.Since(asked) > 3*time.Second:
				asked = time.Now()
				nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+name, []byte(`{"placement":{"preferred":"`+busy+`"}}`), 5*time.Second)
			}
			return false
		})
	}

	// A stepdown hands over to the preferred server when it is healthy
	// enough, and the election may still keep the old leader: the next
	// call tries again, as the coordinator's next look does.
	moves := 0
	for {
		look, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, moved, err := streams.SpreadLeaders(look, js)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if !moved {
			break
		}
		t.Logf("%s: leader %s to %s", m.Stream, m.From, m.To)
		if moves++; moves > 8*n {
			t.Fatalf("%d moves and the leaders are still uneven", moves)
		}
		asked := time.Now()
		relaytest.Eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
			l := leaderOf(t, ctx, js, m.Stream)
			return l == m.To || l != "" && time.Since(asked) > 5*time.Second
		})
	}
	for _, names := range kinds {
		seen := map[string]bool{}
		for _, name := range names {
			seen[leaderOf(t, ctx, js, name)] = true
		}
		if len(seen) != n {
			t.Fatalf("leaders of %v: %v after %d moves, want one partition on each server", names, seen, moves)
		}
	}
	if moves < 2*(n-1) {
		t.Fatalf("%d moves, want at least %d", moves, 2*(n-1))
	}
}
