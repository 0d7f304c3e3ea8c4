package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// kvBaseline measures the baseline of breaker propagation: a KV put
// until a watcher sees it, on the same server; breakers spread through
// such a watch.
func (b *bench) kvBaseline(ctx context.Context) (dist, error) {
	const bucket = "bench_breaker_baseline"
	kv, err := b.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, History: 1})
	if err != nil {
		return dist{}, err
	}
	defer b.js.DeleteKeyValue(context.WithoutCancel(ctx), bucket)
	w, err := kv.Watch(ctx, "provider.mock", jetstream.UpdatesOnly())
	if err != nil {
		return dist{}, err
	}
	defer w.Stop()

	lat := make([]time.Duration, 0, b.plan.kvSamples)
	for i := range b.plan.kvSamples {
		start := time.Now()
		rev, err := kv.Put(ctx, "provider.mock", fmt.Appendf(nil, `{"state":"open","n":%d}`, i))
		if err != nil {
			return dist{}, err
		}
		if err := awaitRevision(ctx, w, rev); err != nil {
			return dist{}, err
		}
		lat = append(lat, time.Since(start))
	}
	return summarize(ms(lat)), nil
}

// awaitRevision waits, at most 5 s, until the watcher delivers rev.
func awaitRevision(ctx context.Context, w jetstream.KeyWatcher, rev uint64) error {
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case e := <-w.Updates():
			if e != nil && e.Revision() >= rev {
				return nil
			}
		case <-timeout.C:
			return fmt.Errorf("watcher did not see revision %d within 5s", rev)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
