package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// Lease elects one holder among the processes that run it: the holder
// writes the key with Create and a per-key TTL (a compare-and-swap against
// "absent": exactly one process wins), renews it every TTL/3 by publishing
// to the key with the last revision expected and a fresh TTL (kv.Update
// would drop the TTL), and deletes it when it stops. Everyone else tries
// Create every TTL/3 and wins once the key expired or was released.
type Lease struct {
	// JS publishes the renewals. A region's JetStream forwards publishes
	// to a shared bucket's keys to the home.
	JS jetstream.JetStream
	// KV is the lease bucket (wire.LeaseBucket).
	KV jetstream.KeyValue
	// Key is the lease's key, Holder the name this process holds it by.
	Key, Holder string
	// TTL is how long a lease outlives a holder that stopped renewing it.
	TTL    time.Duration
	Logger *slog.Logger
}

// CoordinatorLease is the lease that makes one coordinator active, held
// by holder.
func CoordinatorLease(ctx context.Context, js jetstream.JetStream, holder string, ttl time.Duration, logger *slog.Logger) (Lease, error) {
	kv, err := js.KeyValue(ctx, wire.LeaseBucket)
	if err != nil {
		return Lease{}, fmt.Errorf("fleet: bucket %s: %w", wire.LeaseBucket, err)
	}
	return Lease{JS: js, KV: kv, Key: wire.CoordinatorLeaseKey, Holder: holder, TTL: ttl, Logger: logger}, nil
}

// Run competes for the lease until ctx ends. While this process holds it,
// active runs with a context that ends when the lease is lost (a renewal
// refused, or none succeeded for TTL) or ctx ends; Run waits for active to
// return before it competes again, and releases the lease on its way out.
func (l Lease) Run(ctx context.Context, active func(ctx context.Context)) error {
	if l.Logger == nil {
		l.Logger = slog.New(slog.DiscardHandler)
	}
	if l.TTL < time.Second {
		return fmt.Errorf("fleet: lease TTL %v is below 1s", l.TTL)
	}
	every := l.TTL / 3
	for {
		since := time.Now()
		rev, err := l.acquire(ctx, since)
		switch {
		case err == nil:
			l.Logger.Info("lease acquired", "lease", l.Key, "holder", l.Holder)
			l.hold(ctx, rev, since, every, active)
		case !errors.Is(err, jetstream.ErrKeyExists) && ctx.Err() == nil:
			l.Logger.Debug("lease not acquired", "lease", l.Key, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

func (l Lease) record(since time.Time) []byte {
	data, _ := json.Marshal(wire.Lease{Holder: l.Holder, Since: since.UTC(), TTLMS: l.TTL.Milliseconds()})
	return data
}

func (l Lease) acquire(ctx context.Context, since time.Time) (uint64, error) {
	cctx, cancel := context.WithTimeout(ctx, l.TTL/3)
	defer cancel()
	return l.KV.Create(cctx, l.Key, l.record(since), jetstream.KeyTTL(l.TTL))
}

// hold runs active while renewing the lease taken at since, now at rev.
func (l Lease) hold(ctx context.Context, rev uint64, since time.Time, every time.Duration, active func(context.Context)) {
	actx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		active(actx)
	}()
	defer func() {
		stop()
		<-done
		if ctx.Err() != nil {
			// Stopping: hand the lease on at once rather than after TTL.
			rctx, cancel := context.WithTimeout(context.Background(), every)
			defer cancel()
			if err := l.KV.Delete(rctx, l.Key, jetstream.LastRevision(rev)); err == nil {
				l.Logger.Info("lease released", "lease", l.Key, "holder", l.Holder)
			}
		}
	}()
	renewed := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-tick.C:
		}
		next, err := l.renew(ctx, rev, since, every)
		if conflict(err) {
			// A renewal that timed out may have been stored all the same:
			// then the key is still ours, at a later revision.
			if mine, ok := l.ours(ctx, since, every); ok {
				next, err = l.renew(ctx, mine, since, every)
			}
		}
		switch {
		case err == nil:
			rev, renewed = next, time.Now()
		case conflict(err):
			l.Logger.Warn("lease lost: taken by another holder", "lease", l.Key, "holder", l.Holder)
			return
		case time.Since(renewed) >= l.TTL-every:
			l.Logger.Warn("lease lost: not renewed in time", "lease", l.Key, "holder", l.Holder, "err", err)
			return
		default:
			l.Logger.Debug("lease renewal failed; retrying", "lease", l.Key, "err", err)
		}
	}
}

// ours returns the lease's revision if the stored lease is the one this
// holder took at since.
func (l Lease) ours(ctx context.Context, since time.Time, timeout time.Duration) (uint64, bool) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	e, err := l.KV.Get(rctx, l.Key)
	if err != nil {
		return 0, false
	}
	var cur wire.Lease
	if json.Unmarshal(e.Value(), &cur) != nil || cur.Holder != l.Holder || !cur.Since.Equal(since.UTC()) {
		return 0, false
	}
	return e.Revision(), true
}

// renew republishes the lease on top of rev with a fresh TTL.
func (l Lease) renew(ctx context.Context, rev uint64, since time.Time, timeout time.Duration) (uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg := &nats.Msg{Subject: "$KV." + l.KV.Bucket() + "." + l.Key, Data: l.record(since)}
	ack, err := l.JS.PublishMsg(rctx, msg, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(l.TTL))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// LeaseHolder reads who holds the lease at key, "" if nobody.
func LeaseHolder(ctx context.Context, kv jetstream.KeyValue, key string) (wire.Lease, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return wire.Lease{}, nil
	}
	if err != nil {
		return wire.Lease{}, err
	}
	var l wire.Lease
	err = json.Unmarshal(e.Value(), &l)
	return l, err
}
