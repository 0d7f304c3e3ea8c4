package region_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/region"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

var regionB = region.Region{Name: "b", HomeDomain: relaytest.DomainA}

func TestRegionValidate(t *testing.T) {
	for _, tc := range []struct {
		r    region.Region
		want string // "" for valid
	}{
		{region.Region{}, ""},
		{region.Region{Name: "eu"}, ""},
		{region.Region{Name: "eu", Domain: "eu-1", HomeDomain: "us", HomeTimeout: time.Second}, ""},
		{region.Region{HomeDomain: "us"}, "region.name: required"},
		{region.Region{Name: "eu.west"}, "region.name"},
		{region.Region{Name: "eu", HomeDomain: "u s"}, "region.home_domain"},
		{region.Region{Name: "eu", HomeTimeout: -time.Second}, "region.home_timeout"},
		{region.Region{Name: "eu", HomeTimeout: time.Millisecond}, "region.home_timeout"},
	} {
		err := tc.r.Validate("region")
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: got %v, want %q", tc.r, err, tc.want)
		}
	}
	if !(region.Region{}).IsHome() || !(region.Region{Name: "us"}).IsHome() || regionB.IsHome() {
		t.Error("IsHome: a single region and a region without home_domain are their own home; b is not")
	}
	if d := regionB.WithDefaults(); d.Domain != "b" || d.HomeTimeout != region.DefaultHomeTimeout {
		t.Errorf("defaults: %+v", d)
	}
}

// regions is two regions with a client in each: A the home, B a region
// that mirrors A's shared state.
type regions struct {
	*relaytest.Regions
	A jetstream.JetStream
	B *region.Regional
}

func startRegions(t *testing.T) regions {
	t.Helper()
	r := relaytest.TwoRegions(t)
	_, jsA := relaytest.Connect(t, r.A, streams.Topology{})
	_, b := relaytest.ConnectRegion(t, r.B, streams.Topology{}, regionB)
	return regions{Regions: r, A: jsA, B: b}
}

func kv(t *testing.T, js jetstream.JetStream, bucket string) jetstream.KeyValue {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// value is the key's value as kv sees it, "" if it has none.
func value(t *testing.T, kv jetstream.KeyValue, key string) string {
	t.Helper()
	e, err := kv.Get(context.Background(), key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ""
	}
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return string(e.Value())
}

func TestRegionSharedStateReachesOtherRegion(t *testing.T) {
	r := startRegions(t)
	ctx := context.Background()
	a, b := kv(t, r.A, wire.BreakerBucket), kv(t, r.B, wire.BreakerBucket)
	if _, ok := b.(*region.RegionalKV); !ok {
		t.Fatalf("region b sees %s as %T, not as a regional view", wire.BreakerBucket, b)
	}
	filters := []string{"mock", "other.>"}
	w, err := b.WatchFiltered(ctx, filters)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if e := <-w.Updates(); e != nil {
		t.Fatalf("initial values of an empty bucket: %v", e.Key())
	}
	if filters[0] != "mock" {
		t.Fatalf("WatchFiltered changed its filters to %v: a watch started again with them fails", filters)
	}

	// A write in the home reaches a watcher in B.
	start := time.Now()
	if _, err := a.Put(ctx, "mock", []byte("open")); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-w.Updates():
		if e.Key() != "mock" || string(e.Value()) != "open" {
			t.Fatalf("got %s=%s", e.Key(), e.Value())
		}
		t.Logf("a write in A reached a watcher in B after %v", time.Since(start))
	case <-time.After(time.Second):
		t.Fatal("a write in A did not reach B within 1s")
	}

	// A compare-and-set in B, with the revision B read, is stored in the
	// home and comes back through the mirror.
	e, err := b.Get(ctx, "mock")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, "mock", []byte("half-open"), e.Revision()); err != nil {
		t.Fatalf("update from b: %v", err)
	}
	if got := value(t, a, "mock"); got != "half-open" {
		t.Fatalf("home has %q", got)
	}
	if _, err := b.Update(ctx, "mock", []byte("closed"), e.Revision()); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("update with a stale revision: %v, want a revision conflict", err)
	}
	relaytest.Eventually(t, time.Second, time.Millisecond, func() bool { return value(t, b, "mock") == "half-open" })

	// The regions' own streams stay apart: a request queued in one is not
	// stored in the other.
	if _, err := r.B.Publish(ctx, wire.RequestSubject, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.A.Publish(ctx, wire.RequestSubject, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for name, js := range map[string]jetstream.JetStream{"a": r.A, "b": r.B} {
		s, err := js.Stream(ctx, wire.RequestStream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != 1 {
			t.Errorf("region %s stored %d requests, want its own 1", name, info.State.Msgs)
		}
	}
}

func TestRegionPartitionAndHeal(t *testing.T) {
	r := startRegions(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.B.ReconcileInterval = 20 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- r.B.Run(ctx) }()
	defer func() { cancel(); <-done }()
	a, b := kv(t, r.A, wire.BreakerBucket), kv(t, r.B, wire.BreakerBucket)

	for _, k := range []string{"p1", "p3", "p4"} {
		if _, err := a.Put(ctx, k, []byte("closed@a")); err != nil {
			t.Fatal(err)
		}
	}
	relaytest.Eventually(t, time.Second, time.Millisecond, func() bool { return value(t, b, "p4") == "closed@a" })

	r.Link.Cut()
	relaytest.Eventually(t, 5*time.Second, time.Millisecond, func() bool { return !r.Joined() })

	// B acts on its own failures: its compare-and-set, on the revision it
	// read from the home, lands in its overlay.
	e, err := b.Get(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rev, err := b.Update(ctx, "p1", []byte("open@b"), e.Revision())
	if err != nil {
		t.Fatalf("update in b during the partition: %v", err)
	}
	t.Logf("first write in B during the partition took %v (no responders, retried twice)", time.Since(start))
	if _, err := b.Update(ctx, "p1", []byte("open@b"), e.Revision()); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("second update on the same revision: %v, want a revision conflict", err)
	}
	start = time.Now()
	if _, err := b.Update(ctx, "p1", []byte("open@b+1"), rev); err != nil {
		t.Fatalf("update on the overlay revision: %v", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("a write while the home is known unreachable took %v", d)
	}
	if _, err := b.Create(ctx, "p2", []byte("open@b")); err != nil {
		t.Fatalf("create in b during the partition: %v", err)
	}
	if e, err = b.Get(ctx, "p3"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, "p3", []byte("open@b"), e.Revision()); err != nil {
		t.Fatal(err)
	}
	if got := value(t, b, "p1"); got != "open@b+1" {
		t.Fatalf("b sees p1=%q, want its own write", got)
	}
	if got := value(t, a, "p1"); got != "closed@a" {
		t.Fatalf("a sees p1=%q during the partition", got)
	}

	// A goes on too, later than B; B keeps its last known state of what A
	// writes.
	time.Sleep(5 * time.Millisecond) // a later stored time than B's writes
	for _, k := range []string{"p3", "p4"} {
		if _, err := a.Put(ctx, k, []byte("open@a")); err != nil {
			t.Fatal(err)
		}
	}
	if got := value(t, b, "p4"); got != "closed@a" {
		t.Fatalf("b sees p4=%q during the partition, want its last known %q", got, "closed@a")
	}

	// A watcher in B that starts during the partition sees the overlay.
	w, err := b.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	seen := map[string]string{}
	for e := range w.Updates() {
		if e == nil {
			break
		}
		seen[e.Key()] = string(e.Value())
	}
	if seen["p1"] != "open@b+1" || seen["p2"] != "open@b" || seen["p3"] != "open@b" || seen["p4"] != "closed@a" {
		t.Fatalf("watcher in b during the partition: %v", seen)
	}

	r.Link.Heal()
	start = time.Now()
	relaytest.Eventually(t, 5*time.Second, time.Millisecond, r.Joined)
	// Last writer wins, key by key: B's newer writes reach the home, the
	// home's newer write reaches B, and the overlay empties.
	overlay := b.(*region.RegionalKV).Overlay()
	relaytest.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		keys, err := overlay.Keys(ctx)
		return errors.Is(err, jetstream.ErrNoKeysFound) && len(keys) == 0 &&
			value(t, a, "p1") == "open@b+1" && value(t, a, "p2") == "open@b" &&
			value(t, a, "p3") == "open@a" && value(t, b, "p3") == "open@a" &&
			value(t, b, "p4") == "open@a" && value(t, b, "p1") == "open@b+1"
	})
	t.Logf("reconciled %v after the heal", time.Since(start))
	relaytest.Eventually(t, time.Second, time.Millisecond, func() bool {
		for len(w.Updates()) > 0 {
			e := <-w.Updates()
			seen[e.Key()] = string(e.Value())
		}
		return seen["p1"] == "open@b+1" && seen["p2"] == "open@b" && seen["p3"] == "open@a" && seen["p4"] == "open@a"
	})

	// Back to normal: B's writes go to the home again, on home revisions.
	e, err = b.Get(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, "p1", []byte("closed@b"), e.Revision()); err != nil {
		t.Fatalf("update after the heal: %v", err)
	}
	if got := value(t, a, "p1"); got != "closed@b" {
		t.Fatalf("home has p1=%q after the heal", got)
	}
}

func TestRegionSetupKeepsMirrors(t *testing.T) {
	r := relaytest.TwoRegions(t)
	_, _ = relaytest.Connect(t, r.A, streams.Topology{})
	// A region that ran alone before it joined has plain shared buckets.
	_, plain := relaytest.Connect(t, r.B, streams.Topology{})
	ctx := context.Background()
	if _, err := kv(t, plain, wire.BreakerBucket).Put(ctx, "mock", []byte("stale")); err != nil {
		t.Fatal(err)
	}
	// Joining the region replaces them by mirrors; setting up again (every
	// role does at start) leaves the mirrors alone.
	_, b := relaytest.ConnectRegion(t, r.B, streams.Topology{}, regionB)
	for range 2 {
		if err := streams.Setup(ctx, b, streams.Topology{}); err != nil {
			t.Fatal(err)
		}
		if err := region.SetupRegion(ctx, b, streams.Topology{}, regionB); err != nil {
			t.Fatal(err)
		}
	}
	for _, bucket := range wire.SharedStateBuckets {
		s, err := plain.Stream(ctx, "KV_"+bucket)
		if err != nil {
			t.Fatal(err)
		}
		if m := s.CachedInfo().Config.Mirror; m == nil || m.Name != "KV_"+bucket {
			t.Errorf("%s in region b is not a mirror of the home's bucket: %+v", bucket, m)
		}
	}
	if got := value(t, kv(t, b, wire.BreakerBucket), "mock"); got != "" {
		t.Errorf("the region's stale copy survived: %q", got)
	}
	if err := streams.Check(ctx, b); err != nil {
		t.Errorf("check: %v", err)
	}
}

// A lease taken in a region cut off from the home is renewed there, by a
// publish with a TTL and the expected revision, as relay/fleet.Lease
// does; after the heal it reaches the home with its TTL.
func TestRegionLeaseDuringPartition(t *testing.T) {
	r := startRegions(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.B.ReconcileInterval = 20 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- r.B.Run(ctx) }()
	defer func() { cancel(); <-done }()
	b := kv(t, r.B, wire.LeaseBucket)
	subject := "$KV." + wire.LeaseBucket + "." + wire.CoordinatorLeaseKey

	r.Link.Cut()
	relaytest.Eventually(t, 5*time.Second, time.Millisecond, func() bool { return !r.Joined() })
	rev, err := b.Create(ctx, wire.CoordinatorLeaseKey, []byte("b-1"), jetstream.KeyTTL(time.Minute))
	if err != nil {
		t.Fatalf("take the lease in b: %v", err)
	}
	renew := func(rev uint64, holder string) (*jetstream.PubAck, error) {
		return r.B.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte(holder)},
			jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(time.Minute))
	}
	ack, err := renew(rev, "b-1")
	if err != nil {
		t.Fatalf("renew in b: %v", err)
	}
	if _, err := renew(rev, "b-2"); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("a renewal on a stale revision: %v, want a revision conflict", err)
	}
	if got := value(t, b, wire.CoordinatorLeaseKey); got != "b-1" {
		t.Fatalf("b sees the lease held by %q", got)
	}
	if ack.Sequence == rev {
		t.Fatal("the renewal did not store a new revision")
	}

	r.Link.Heal()
	s, err := r.A.Stream(ctx, "KV_"+wire.LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	relaytest.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		m, err := s.GetLastMsgForSubject(ctx, subject)
		return err == nil && string(m.Data) == "b-1" && m.Header.Get(jetstream.MsgTTLHeader) == "1m0s"
	})
}

// A region's mirrors of the shared buckets and their overlays have the
// byte limit of shared state (streams.storage_mib.state), so neither can
// fill a region's disk; a region set up before gets it at its next setup.
func TestRegionBucketsHaveByteLimits(t *testing.T) {
	r := relaytest.TwoRegions(t)
	_, _ = relaytest.Connect(t, r.A, streams.Topology{})
	nc, b := relaytest.ConnectRegion(t, r.B, streams.Topology{}, regionB)
	plain, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(top streams.Topology) {
		t.Helper()
		want := top.Storage.StateBytes()
		for _, bucket := range wire.SharedStateBuckets {
			for _, name := range []string{bucket, region.OverlayBucket(bucket)} {
				s, err := plain.Stream(ctx, "KV_"+name)
				if err != nil {
					t.Fatal(err)
				}
				if got := s.CachedInfo().Config.MaxBytes; got != want {
					t.Errorf("%s: max bytes %d, want %d", name, got, want)
				}
			}
		}
	}
	check(streams.Topology{})
	if want := int64(streams.DefaultStateMiB) << 20; (streams.StorageLimits{}).StateBytes() != want {
		t.Fatalf("default state limit %d, want %d", (streams.StorageLimits{}).StateBytes(), want)
	}
	smaller := streams.Topology{Storage: streams.StorageLimits{State: 4}}
	if err := region.SetupRegion(ctx, b, smaller, regionB); err != nil {
		t.Fatal(err)
	}
	check(smaller)
}
