package worker

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/spend"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// usageLedger records each stream's usage in wire.UsageBucket, where
// edges count it against the tenants' budgets (relay/spend). The job
// that appends a stream's end frame records it before it acks the
// request; a job that finds the stream ended records it again from the
// end frame, which covers a worker that stopped in between, and
// spend.Store counts a stream once however often it is recorded.
//
// A record is tried again while the bucket has no leader (an election in
// a replicated cluster, streams.RetryLeaderless), for as long as the
// job's chunk-log writes are (worker.append_retry): once the request is
// acked, no job of it is left to record its usage, and a budget would not
// count tokens that were paid for.
//
// The bucket is looked up on first use, not at start, so a worker whose
// NATS has no ledger yet serves all the same (its usage goes uncounted,
// with a warning); a lookup that found it missing stands for ledgerRetry.
type usageLedger struct {
	b *streams.Bucket
}

const (
	// ledgerRetry spaces the lookups of a bucket found missing.
	ledgerRetry = 5 * time.Second
	// ledgerTimeout bounds one try at recording a stream's usage.
	ledgerTimeout = 2 * time.Second
)

// ledgerSpacing spaces the tries of a record that found no leader.
var ledgerSpacing = backoff.Backoff{Config: backoff.Config{Base: 100 * time.Millisecond, Cap: time.Second}}

func newUsageLedger(js jetstream.JetStream) usageLedger {
	return usageLedger{streams.NewBucket(js, wire.UsageBucket, ledgerRetry)}
}

// record stores r, the usage of stream id, trying again while the
// bucket has no leader, until ctx ends.
func (l usageLedger) record(ctx context.Context, id string, r spend.Record) error {
	return streams.RetryLeaderless(ctx, ledgerSpacing, ledgerTimeout, func(ctx context.Context) error {
		kv, err := l.b.KV(ctx)
		if err == nil {
			_, err = spend.Store(ctx, kv, id, r)
		}
		return err
	})
}

// recordUsage records the usage of end, the stream's end frame. The
// record counts in the UTC day the edge accepted the request
// (wire.Request.Created), which every job of the stream agrees on.
func (j *job) recordUsage(end wire.Frame) {
	r := spend.NewRecord(j.req.Tenant, j.req.Key, time.Unix(j.req.Created, 0), end.Usage, end.Cost)
	if r.Empty() {
		return
	}
	ctx, cancel := context.WithTimeout(j.logCtx, max(j.w.appendRetry, ledgerTimeout))
	defer cancel()
	if err := j.w.usage.record(ctx, j.req.StreamID, r); err != nil {
		j.log.Warn("usage not recorded", "tenant", j.req.Tenant, "tokens", r.Tokens, "cost", r.CostUSD, "err", err)
	}
}
