package fleet_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// slowReadKV holds an Update's read after a conflict until the test says
// so: its answer is then older than what the watch has brought since.
type slowReadKV struct {
	jetstream.KeyValue
	// beforeUpdate runs as an Update is sent; read (one at a time) gets
	// the entry a read fetched and releases it when the test is ready.
	beforeUpdate func()
	read         chan jetstream.KeyValueEntry
	release      chan struct{}
}

func (k *slowReadKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	k.beforeUpdate()
	return k.KeyValue.Update(ctx, key, value, rev)
}

func (k *slowReadKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	e, err := k.KeyValue.Get(ctx, key)
	if err == nil {
		k.read <- e
		<-k.release
	}
	return e, err
}

// An Update that loses to another writer reads the key again; if the watch
// brought a later change while that read was under way, the copy keeps the
// later one. (Taken back, a worker's breaker stayed half-open in its copy
// after the cluster closed it, and its waiting requests failed.)
func TestTableNeverStepsBack(t *testing.T) {
	srv := relaytest.NATS(t)
	_, js := relaytest.Connect(t, srv, streams.Topology{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other, err := js.KeyValue(ctx, wire.BreakerBucket)
	if err != nil {
		t.Fatal(err)
	}
	put := func(n int) {
		t.Helper()
		data, _ := json.Marshal(counter{N: n, By: "other"})
		if _, err := other.Put(ctx, "k", data); err != nil {
			t.Fatal(err)
		}
	}
	put(1)
	_, js2 := relaytest.Connect(t, srv, streams.Topology{})
	real, err := js2.KeyValue(ctx, wire.BreakerBucket)
	if err != nil {
		t.Fatal(err)
	}
	kv := &slowReadKV{KeyValue: real, read: make(chan jetstream.KeyValueEntry), release: make(chan struct{})}
	tab := fleet.NewTable[counter](kv, relaytest.Logger(t))
	go tab.Run(ctx)
	<-tab.Synced()
	seen := func(n int) func() bool {
		return func() bool { row, _ := tab.Get("k"); return row.Value.N == n }
	}
	relaytest.Eventually(t, 2*time.Second, time.Millisecond, seen(1))

	// Another writer gets in first (2): the update conflicts and reads.
	kv.beforeUpdate = func() { put(2) }
	updated := make(chan error, 1)
	go func() {
		_, _, err := tab.Update(ctx, "k", func(cur counter, _ bool) (counter, error) {
			if cur.N != 1 {
				return cur, fleet.ErrNoChange // lost to the other writer, as a probe claim is
			}
			return counter{N: 100, By: "table"}, nil
		})
		updated <- err
	}()
	if e := <-kv.read; e.Revision() == 0 {
		t.Fatal("no revision read")
	}
	// While that read is under way, the other writer moves on (3) and the
	// watch brings it.
	put(3)
	relaytest.Eventually(t, 2*time.Second, time.Millisecond, seen(3))
	close(kv.release)
	if err := <-updated; err != nil {
		t.Fatal(err)
	}
	if row, _ := tab.Get("k"); row.Value.N != 3 {
		t.Fatalf("the copy holds %+v after a late read, want the watch's later 3", row.Value)
	}
}
