package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/spend"
	"github.com/relaydev/relay/relay/wire"
)

// usageLedger records each stream's usage in wire.UsageBucket, where
// edges count it against the tenants' budgets (relay/spend). The job
// that appends a stream's end frame records it before it acks the
// request; a job that finds the stream ended records it again from the
// end frame, which covers a worker that stopped in between, and
// spend.Store counts a stream once however often it is recorded.
//
// The bucket is opened on first use, not at start, so a worker whose
// NATS has no ledger yet serves all the same (its usage goes uncounted,
// with a warning).
type usageLedger struct {
	mu      sync.Mutex
	kv      jetstream.KeyValue
	retryAt time.Time
}

// ledgerRetry spaces the attempts to open the bucket.
const ledgerRetry = 5 * time.Second

// ledgerTimeout bounds recording one stream's usage.
const ledgerTimeout = 2 * time.Second

// errNoLedger: the bucket could not be opened a moment ago.
var errNoLedger = errors.New("worker: the usage ledger is unavailable")

func (l *usageLedger) open(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kv != nil {
		return l.kv, nil
	}
	if time.Now().Before(l.retryAt) {
		return nil, errNoLedger
	}
	kv, err := js.KeyValue(ctx, wire.UsageBucket)
	if err != nil {
		l.retryAt = time.Now().Add(ledgerRetry)
		return nil, err
	}
	l.kv = kv
	return kv, nil
}

// recordUsage records the usage of end, the stream's end frame. The
// record counts in the UTC day the edge accepted the request
// (wire.Request.Created), which every job of the stream agrees on.
func (j *job) recordUsage(end wire.Frame) {
	r := spend.NewRecord(j.req.Tenant, j.req.Key, time.Unix(j.req.Created, 0), end.Usage, end.Cost)
	if r.Empty() {
		return
	}
	ctx, cancel := context.WithTimeout(j.logCtx, ledgerTimeout)
	defer cancel()
	kv, err := j.w.usage.open(ctx, j.w.js)
	if err == nil {
		_, err = spend.Store(ctx, kv, j.req.StreamID, r)
	}
	if err != nil {
		j.log.Warn("usage not recorded", "tenant", j.req.Tenant, "tokens", r.Tokens, "cost", r.CostUSD, "err", err)
	}
}
