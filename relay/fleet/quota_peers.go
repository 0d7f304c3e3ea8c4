package fleet

import (
	"context"
	"time"

	"github.com/relaydev/relay/relay/fleet/quota"
)

// # Counting the nodes without a coordinator
//
// A node without a share splits each limit evenly over the nodes of its
// role that reported lately (QuotaNode). It counts them in a watch of the
// role's demand keys, open only while it has no share. Listing the keys
// every round instead creates and deletes a consumer per node per second,
// each a proposal to the meta group of a replicated cluster; and a watch
// kept open while the coordinator hands out shares would bring every node
// every other node's report, every round, for nothing.

// peerWatch is the open watch of the role's demand reports.
type peerWatch struct {
	reports *Table[quota.Report]
	stop    context.CancelFunc
	done    chan struct{}
}

// followPeers opens the watch (on) or closes it, if it is not so already.
// Only Run calls it; the watch lives under ctx, Run's.
func (q *QuotaNode) followPeers(ctx context.Context, on bool) {
	q.mu.Lock()
	w := q.peers
	switch {
	case on && w == nil:
		ctx, stop := context.WithCancel(ctx)
		w = &peerWatch{reports: NewTable[quota.Report](q.KV, q.Logger, DemandPrefix+q.Role+".>"), stop: stop, done: make(chan struct{})}
		q.peers = w
		q.mu.Unlock()
		go func() {
			defer close(w.done)
			_ = w.reports.Run(ctx)
		}()
		return
	case !on && w != nil:
		q.peers = nil
		q.mu.Unlock()
		w.stop()
		<-w.done
		return
	}
	q.mu.Unlock()
}

// countNodes counts the nodes of the role whose reports are fresh, this
// one included, once the watch has replayed them (or ctx ended: then
// zero, and the last count stands).
func (q *QuotaNode) countNodes(ctx context.Context) int {
	q.mu.Lock()
	w := q.peers
	q.mu.Unlock()
	if w == nil {
		return 0
	}
	select {
	case <-w.reports.Synced():
	case <-ctx.Done():
		return 0
	}
	now := time.Now()
	n := 1
	for _, row := range w.reports.All() {
		if row.Value.Node != q.ID && row.Value.Fresh(now) {
			n++
		}
	}
	return n
}
