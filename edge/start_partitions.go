package edge

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// partitions gives each new stream its partition (wire's "Partitions"):
// the next one in turn of those the assets record (streams.Partitions), so
// that an edge's streams are spread evenly over the chunk streams' leaders.
// A generation takes a partition of generations, a Durable Stream one of
// Durable Streams, each kind in its own turn.
// The count is read again every partitionsRead, by the one request that
// finds it old; the others go on with the count known. The first
// partition of each kind exists wherever an edge serves (streams.Check),
// so until a read answers the streams go there.
type partitions struct {
	js jetstream.JetStream
	n  atomic.Int32
	// turn and durableTurn count the streams of each kind made.
	turn, durableTurn atomic.Uint32
	// reading is held by the request that reads the count; at is when it
	// was last read.
	reading sync.Mutex
	at      atomic.Int64
}

// partitionsRead is how often the count is read: a change of
// streams.partitions reaches new streams within it.
const partitionsRead = 30 * time.Second

func newPartitions(js jetstream.JetStream) *partitions {
	p := &partitions{js: js}
	p.n.Store(1)
	return p
}

// newStreamID returns a fresh generation's stream id in the next
// partition of generations.
func (p *partitions) newStreamID(ctx context.Context) string {
	return wire.NewStreamIDIn(p.next(ctx, &p.turn))
}

// nextDurable is the k of the next partition of Durable Streams
// (wire.DurablePartition(k)), which relay/durable names its new streams in.
func (p *partitions) nextDurable(ctx context.Context) int {
	return p.next(ctx, &p.durableTurn)
}

// next is the k of the next partition in turn, reading the count first
// if it is old.
func (p *partitions) next(ctx context.Context, turn *atomic.Uint32) int {
	if time.Since(time.Unix(0, p.at.Load())) > partitionsRead && p.reading.TryLock() {
		p.read(ctx)
		p.reading.Unlock()
	}
	n := uint32(p.n.Load())
	return int(turn.Add(1) % n)
}

// read reads the count, keeping the one known if the read fails.
func (p *partitions) read(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	n, err := streams.Partitions(ctx, p.js)
	if err != nil {
		// Tried again in a second, not by every request meanwhile.
		p.at.Store(time.Now().Add(time.Second - partitionsRead).UnixNano())
		return
	}
	p.n.Store(int32(n))
	p.at.Store(time.Now().UnixNano())
}
