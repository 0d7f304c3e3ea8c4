package fleet_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

type counter struct {
	N  int    `json:"n"`
	By string `json:"by"`
}

// Two copies of a bucket increment one key concurrently: every write is
// based on the value before it, so none is lost, and each copy ends with
// the other's writes through its watch.
func TestTableUpdateNeverLosesAWrite(t *testing.T) {
	srv := relaytest.NATS(t)
	_, js := relaytest.Connect(t, srv, streams.Topology{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var tables []*fleet.Table[counter]
	for range 2 {
		_, js2 := relaytest.Connect(t, srv, streams.Topology{})
		kv, err := js2.KeyValue(ctx, wire.BreakerBucket)
		if err != nil {
			t.Fatal(err)
		}
		tab := fleet.NewTable[counter](kv, relaytest.Logger(t))
		go tab.Run(ctx)
		<-tab.Synced()
		tables = append(tables, tab)
	}
	var written atomic.Int64
	var wg sync.WaitGroup
	for i, tab := range tables {
		wg.Go(func() {
			for range 50 {
				_, ok, err := tab.Update(ctx, "k", func(cur counter, _ bool) (counter, error) {
					return counter{N: cur.N + 1, By: string(rune('a' + i))}, nil
				})
				if err != nil {
					// Four conflicts in a row under this contention are
					// possible; the caller tries again later.
					continue
				}
				if ok {
					written.Add(1)
				}
			}
		})
	}
	wg.Wait()
	kv, _ := js.KeyValue(ctx, wire.BreakerBucket)
	e, err := kv.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(e.Value()); !jsonHasN(got, int(written.Load())) {
		t.Fatalf("stored %s after %d writes", got, written.Load())
	}
	for _, tab := range tables {
		relaytest.Eventually(t, 2*time.Second, 10*time.Millisecond, func() bool {
			row, _ := tab.Get("k")
			return row.Value.N == int(written.Load())
		})
	}
	// ErrNoChange writes nothing.
	_, ok, err := tables[0].Update(ctx, "k", func(cur counter, _ bool) (counter, error) { return cur, fleet.ErrNoChange })
	if ok || err != nil {
		t.Fatalf("no-change update: %v %v", ok, err)
	}
}

func jsonHasN(s string, n int) bool {
	var c counter
	return jsonUnmarshal(s, &c) == nil && c.N == n
}

// One lease, two contenders: one holds it, renews it past its TTL, and
// hands it on at once when it stops; a holder that dies (its connection
// gone, no release) loses it after the TTL.
func TestLeaseOneHolderTakeover(t *testing.T) {
	srv := relaytest.NATS(t)
	const ttl = time.Second
	type contender struct {
		name   string
		active atomic.Bool
		cancel context.CancelFunc
		done   chan struct{}
		close  func()
	}
	start := func(name string) *contender {
		nc, js := relaytest.Connect(t, srv, streams.Topology{})
		kv, err := js.KeyValue(context.Background(), wire.LeaseBucket)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		c := &contender{name: name, cancel: cancel, done: make(chan struct{}), close: nc.Close}
		l := fleet.Lease{JS: js, KV: kv, Key: "test", Holder: name, TTL: ttl, Logger: relaytest.Logger(t)}
		go func() {
			defer close(c.done)
			l.Run(ctx, func(ctx context.Context) {
				c.active.Store(true)
				<-ctx.Done()
				c.active.Store(false)
			})
		}()
		t.Cleanup(func() { cancel(); <-c.done })
		return c
	}
	a := start("a")
	relaytest.Eventually(t, 2*time.Second, 10*time.Millisecond, a.active.Load)
	b := start("b")
	time.Sleep(3 * ttl) // a renews; b never gets in
	if !a.active.Load() || b.active.Load() {
		t.Fatalf("after 3 TTLs: a active %v, b active %v", a.active.Load(), b.active.Load())
	}
	stopped := time.Now()
	a.cancel()
	<-a.done
	relaytest.Eventually(t, 2*ttl, 10*time.Millisecond, b.active.Load)
	t.Logf("released lease taken over in %v", time.Since(stopped).Round(time.Millisecond))

	c := start("c")
	died := time.Now()
	b.close() // b's connection dies: no renewal, no release
	relaytest.Eventually(t, 4*ttl, 10*time.Millisecond, c.active.Load)
	if took := time.Since(died); took < ttl/2 {
		t.Fatalf("taken over %v after the holder died, before its TTL", took)
	}
}

// restartableKV records the filters of every watch and lets the test end
// the current one, as a lost connection would.
type restartableKV struct {
	jetstream.KeyValue
	mu      sync.Mutex
	filters [][]string
	current jetstream.KeyWatcher
}

func (k *restartableKV) WatchFiltered(ctx context.Context, keys []string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	k.mu.Lock()
	k.filters = append(k.filters, slices.Clone(keys))
	k.mu.Unlock()
	w, err := k.KeyValue.WatchFiltered(ctx, keys, opts...)
	k.mu.Lock()
	k.current = w
	k.mu.Unlock()
	return w, err
}

func (k *restartableKV) endWatch() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.current.Stop()
}

// A watch that ends starts again with the same filters: the table keeps
// its keys, picks up what changed meanwhile, and still leaves out the keys
// its filter does not match.
func TestTableWatchRestarts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plain := bucket(t, relaytest.NATS(t), wire.QuotaBucket)
	put := func(key string, n int) {
		t.Helper()
		if _, err := plain.Put(ctx, key, fmt.Appendf(nil, `{"n":%d}`, n)); err != nil {
			t.Fatal(err)
		}
	}
	put("demand.a", 1)
	kv := &restartableKV{KeyValue: plain}
	tab := fleet.NewTable[counter](kv, relaytest.Logger(t), "demand.>")
	go tab.Run(ctx)
	<-tab.Synced()
	if row, ok := tab.Get("demand.a"); !ok || row.Value.N != 1 {
		t.Fatalf("demand.a: %+v %v", row, ok)
	}

	kv.endWatch()
	put("demand.b", 2)
	put("share.c", 3)
	relaytest.Eventually(t, 5*time.Second, 10*time.Millisecond, func() bool {
		_, ok := tab.Get("demand.b")
		return ok
	})
	if row, ok := tab.Get("demand.a"); !ok || row.Value.N != 1 {
		t.Fatalf("demand.a after the restart: %+v %v", row, ok)
	}
	if _, ok := tab.Get("share.c"); ok {
		t.Fatal("share.c is outside the filter, yet in the table")
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for i, f := range kv.filters {
		if !slices.Equal(f, []string{"demand.>"}) {
			t.Fatalf("watch %d had filters %q", i+1, f)
		}
	}
	if len(kv.filters) < 2 {
		t.Fatalf("%d watches, want a restarted one", len(kv.filters))
	}
}

// lostAckJS stores every publish but, once armed, answers the next one
// with a timeout, as a renewal whose ack was lost on a loaded machine.
type lostAckJS struct {
	jetstream.JetStream
	armed atomic.Bool
	lost  atomic.Int64
}

func (j *lostAckJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := j.JetStream.PublishMsg(ctx, m, opts...)
	if err == nil && j.armed.CompareAndSwap(true, false) {
		j.lost.Add(1)
		return nil, context.DeadlineExceeded
	}
	return ack, err
}

// A renewal stored without its ack reaching the holder does not make the
// holder believe the lease was taken: it finds the stored lease its own
// and renews on top of it.
func TestLeaseSurvivesALostRenewalAck(t *testing.T) {
	srv := relaytest.NATS(t)
	_, js := relaytest.Connect(t, srv, streams.Topology{})
	kv := bucket(t, srv, wire.LeaseBucket)
	ljs := &lostAckJS{JetStream: js}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var active, lost atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		fleet.Lease{JS: ljs, KV: kv, Key: "test", Holder: "a", TTL: time.Second, Logger: relaytest.Logger(t)}.Run(ctx, func(ctx context.Context) {
			active.Add(1)
			<-ctx.Done()
			lost.Add(1)
		})
	}()
	relaytest.Eventually(t, 2*time.Second, 10*time.Millisecond, func() bool { return active.Load() == 1 })
	ljs.armed.Store(true)
	relaytest.Eventually(t, 2*time.Second, 10*time.Millisecond, func() bool { return ljs.lost.Load() == 1 })
	time.Sleep(2 * time.Second) // two TTLs of renewals after the lost ack
	if lost.Load() != 0 {
		t.Fatalf("the holder gave the lease up after a renewal whose ack was lost (%d times active)", active.Load())
	}
	cancel()
	<-done
}

// lostAckKV stores every update but answers the first with a timeout.
type lostAckKV struct {
	jetstream.KeyValue
	lost atomic.Bool
}

func (k *lostAckKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	n, err := k.KeyValue.Update(ctx, key, value, rev)
	if err == nil && k.lost.CompareAndSwap(false, true) {
		return 0, context.DeadlineExceeded
	}
	return n, err
}

// An update stored without its ack reaching the writer counts as
// written: the writer finds its own bytes in the bucket.
func TestTableUpdateWithALostAck(t *testing.T) {
	ctx := context.Background()
	plain := bucket(t, relaytest.NATS(t), wire.BreakerBucket)
	if _, err := plain.Put(ctx, "k", []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	tab := fleet.NewTable[counter](&lostAckKV{KeyValue: plain}, relaytest.Logger(t))
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go tab.Run(runCtx)
	<-tab.Synced()
	v, written, err := tab.Update(ctx, "k", func(cur counter, _ bool) (counter, error) {
		return counter{N: cur.N + 1, By: "me"}, nil
	})
	if err != nil || !written || v.N != 2 {
		t.Fatalf("update with a lost ack: %+v written %v, %v", v, written, err)
	}
	e, err := plain.Get(ctx, "k")
	if err != nil || !jsonHasN(string(e.Value()), 2) {
		t.Fatalf("stored %s, %v", e.Value(), err)
	}
	if row, _ := tab.Get("k"); row.Rev != e.Revision() {
		t.Fatalf("local revision %d, stored %d", row.Rev, e.Revision())
	}
}
