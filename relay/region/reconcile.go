package region

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/backoff"
)

// DefaultReconcileInterval is Regional.ReconcileInterval's default.
const DefaultReconcileInterval = time.Second

// Run reconciles the region's overlays into the home until ctx ends. It
// follows each overlay with a watcher; while one holds entries, it tries
// the home every ReconcileInterval. Once the home answers, each key is
// settled by its newest write (stored time; a tie goes to the home):
//
//   - the overlay's write is newer: it is written to the home, compared
//     and set against the home's latest revision of the key, so a home
//     write that came in between wins the next round instead;
//   - the home's is newer: the overlay's write is dropped.
//
// Either way the overlay entry is purged only once the region's mirror
// holds the home's result, so what the region sees never steps back. A
// write that loses a compare-and-set, in the home or in the overlay, is
// retried from fresh reads in the next round; every process of the region
// may run Run at once. In the home region, or without regions, Run
// returns nil at once.
func (g *Regional) Run(ctx context.Context) error {
	if !g.active {
		return nil
	}
	interval := g.ReconcileInterval
	if interval <= 0 {
		interval = DefaultReconcileInterval
	}
	// A reconciliation that stopped starts again after a backoff; one that
	// had its watcher going starts the backoff over.
	retry := backoff.Backoff{Config: backoff.Config{Base: interval, Cap: 4 * interval}}
	var wg sync.WaitGroup
	for bucket := range g.shared {
		wg.Go(func() {
			retry.Rerun(ctx, func(ctx context.Context) (bool, error) { return g.reconcile(ctx, bucket, interval) }, func(err error, d time.Duration) {
				g.logger.Warn("overlay reconciliation stopped; starting it again", "bucket", bucket, "err", err, "in", d)
			})
		})
	}
	wg.Wait()
	return nil
}

// pending is an overlay entry not yet reconciled.
type pending struct {
	entry jetstream.KeyValueEntry // as the overlay stores it (untagged revision)
	// target is the home revision the mirror must reach before the entry
	// is purged; zero until the entry has been settled against the home.
	target  uint64
	settled bool
}

// reconcile follows the overlay of bucket until ctx ends or its watcher
// fails; watched reports that the watcher was started.
func (g *Regional) reconcile(ctx context.Context, bucket string, interval time.Duration) (watched bool, err error) {
	v, err := g.view(ctx, bucket)
	if err != nil {
		return false, err
	}
	w, err := v.overlay.WatchAll(ctx)
	if err != nil {
		return false, fmt.Errorf("region: watch overlay of %s: %w", bucket, err)
	}
	defer w.Stop()
	keys := map[string]*pending{}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case e, ok := <-w.Updates():
			if !ok {
				return true, errors.New("region: overlay watcher ended")
			}
			if e == nil {
				continue
			}
			if e.Operation() == jetstream.KeyValuePurge {
				delete(keys, e.Key())
				continue
			}
			keys[e.Key()] = &pending{entry: e}
		case <-tick.C:
			for key, p := range keys {
				done, err := g.reconcileKey(ctx, v, key, p)
				if err != nil {
					g.logger.Debug("overlay not reconciled yet", "bucket", bucket, "key", key, "err", err)
					break // the home is unreachable: try again next round
				}
				if done {
					delete(keys, key)
				}
			}
		}
	}
}

// reconcileKey settles one overlay entry against the home, then purges it
// once the mirror has caught up. done reports that it was purged.
func (g *Regional) reconcileKey(ctx context.Context, v *RegionalKV, key string, p *pending) (done bool, err error) {
	o := p.entry
	if !p.settled {
		hctx, cancel := context.WithTimeout(ctx, g.region.HomeTimeout)
		defer cancel()
		hs, err := v.homeStream(hctx)
		if err != nil {
			return false, err
		}
		h, err := lastEntry(hctx, hs, v.name, key, "$KV."+v.name+".", 0)
		if err != nil {
			return false, err
		}
		g.homeAnswered()
		if h != nil && !o.Created().After(h.Created()) {
			p.target, p.settled = h.Revision(), true
			g.logger.Info("shared state reconciled: the home's write is newer", "bucket", v.name, "key", key)
		} else {
			var last uint64
			if h != nil {
				last = h.Revision()
			}
			rev, err := g.writeHome(hctx, v, key, o, h, last)
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
				return false, nil // a newer home write came in between: next round
			}
			if err != nil {
				return false, err
			}
			p.target, p.settled = rev, true
			g.logger.Info("shared state reconciled: the region's write is newer and was written to the home", "bucket", v.name, "key", key)
		}
	}
	if p.target > 0 {
		m, err := lastEntry(ctx, v.mirrorStream, v.name, key, "$KV."+v.name+".", 0)
		if err != nil {
			return false, err
		}
		if m == nil || m.Revision() < p.target {
			return false, nil // the mirror is behind: the overlay keeps the key
		}
	}
	err = v.overlay.Purge(ctx, key, jetstream.LastRevision(o.Revision()))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return false, nil // written again meanwhile; the watcher brings the new entry
	}
	return err == nil, err
}

// writeHome stores the overlay entry o in the home's bucket if the key's
// latest home revision is still last (0: none), with the TTL it was
// written with, and returns the new revision; zero when there is nothing
// to write (a delete of a key the home does not have).
func (g *Regional) writeHome(ctx context.Context, v *RegionalKV, key string, o, h jetstream.KeyValueEntry, last uint64) (uint64, error) {
	m := nats.NewMsg(g.kvPre + "$KV." + v.name + "." + key)
	if o.Operation() == jetstream.KeyValueDelete {
		if h == nil || h.Operation() != jetstream.KeyValuePut {
			return 0, nil
		}
		m.Header.Set("KV-Operation", "DEL")
	} else {
		m.Data = o.Value()
		raw, err := v.overlayStream.GetMsg(ctx, o.Revision()&^overlayRevision)
		if err != nil {
			return 0, err
		}
		if ttl := raw.Header.Get(jetstream.MsgTTLHeader); ttl != "" {
			m.Header.Set(jetstream.MsgTTLHeader, ttl)
		}
	}
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	ack, err := g.JetStream.PublishMsg(ctx, m)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// homeStream is the home's stream of the bucket, looked up once.
func (v *RegionalKV) homeStream(ctx context.Context) (jetstream.Stream, error) {
	v.g.mu.Lock()
	s := v.home
	v.g.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := v.g.home.Stream(ctx, kvStream(v.name))
	if err != nil {
		return nil, err
	}
	v.g.mu.Lock()
	v.home = s
	v.g.mu.Unlock()
	return s, nil
}
