package chunklog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// clusterAppends is how many frames TestAtReplicatedNeverMisses appends;
// each is read through every server right after its ack.
const clusterAppends = 1000

// In an R3 cluster a direct get may reach a replica that does not hold an
// acknowledged frame yet. At, given the cursor of a frame the writer was
// just acknowledged, must find it through every server: a false
// ErrNoFrame is a false 410 cursor_expired.
func TestAtReplicatedNeverMisses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes := relaytest.Cluster(t, 3)
	_, js := relaytest.Connect(t, nodes[0], streams.Topology{Replicas: 3})
	readers := make([]*chunklog.Reader, len(nodes))
	conns := make([]*nats.Conn, len(nodes))
	for i, s := range nodes {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		conns[i], readers[i] = nc, chunklog.NewReader(nc, "")
	}
	// A new stream's replicas answer direct gets through a server only
	// once their interest reached it over the routes, which a loaded
	// machine delays: until then a get is "no responders", not a miss.
	// The stream is in a partition other than the first, whose chunk
	// stream has a name of its own.
	id := wire.NewStreamIDIn(2)
	for _, r := range readers {
		relaytest.Eventually(t, 10*time.Second, 20*time.Millisecond, func() bool {
			_, _, err := r.At(ctx, id, 1)
			return errors.Is(err, chunklog.ErrNoFrame)
		})
	}
	w := chunklog.NewWriter(js, readers[0], id, 0, 0)
	misses := 0
	for i := 1; i <= clusterAppends; i++ {
		c, err := appendR3(ctx, w, wire.Frame{Kind: wire.KindChunk, Content: fmt.Sprint(i)})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		for k, r := range readers {
			subject, f, err := r.At(ctx, id, c.JSSeq)
			if err != nil {
				misses++
				t.Errorf("frame %d through server %d: At(%d): %v", i, k+1, c.JSSeq, err)
				continue
			}
			if subject != wire.ChunkSubject(id) || f.Seq != c.Seq {
				t.Errorf("frame %d through server %d: At(%d) = %q %+v", i, k+1, c.JSSeq, subject, f)
			}
		}
	}
	var leader uint64
	for k, r := range readers {
		leader += r.LeaderReads()
		t.Logf("server %d: %d of %d reads missed with a direct get and were confirmed by the leader", k+1, r.LeaderReads(), clusterAppends)
	}
	if misses > 0 {
		t.Fatalf("%d false misses", misses)
	}
	// A frame that is gone is still ErrNoFrame, from the leader's word.
	if _, _, err := readers[1].At(ctx, id, 1<<40); !errors.Is(err, chunklog.ErrNoFrame) {
		t.Fatalf("At(missing) err = %v", err)
	}
}

// appendR3 is w.Append, retried while an R3 stream's leader answers that
// the subject's previous append is still in process (10164, "wrong last
// sequence" without a number): it may, right after acknowledging that
// append. The Writer does not retry it itself (left alone here: it is not
// what this test is about).
func appendR3(ctx context.Context, w *chunklog.Writer, f wire.Frame) (wire.Cursor, error) {
	for attempt := 0; ; attempt++ {
		c, err := w.Append(ctx, f)
		var apiErr *jetstream.APIError
		if attempt < 50 && errors.As(err, &apiErr) && apiErr.ErrorCode == 10164 {
			time.Sleep(time.Millisecond)
			continue
		}
		return c, err
	}
}
