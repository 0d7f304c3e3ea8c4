package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/region"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// Regions (configs/README.md "Regions"): two regions in one test process. Region A is
// the home: a nats-server with JetStream domain "a" that accepts leaf
// nodes. Region B is a nats-server with domain "b" that joins A as a leaf
// through a TCP proxy the test cuts and heals. Each region runs its own
// edge and worker; the shared state is A's, mirrored into B.

// regionRun is one region's running relay.
type regionRun struct {
	Name string
	Edge string // base URL
	// Mock is the region's own fake upstream, provider "mock": the same
	// provider, and so the same breaker, in both regions.
	Mock *mockupstream.Server
	// State is the region's view of the shared state, as its roles see it.
	State *region.Regional
	// JS is the region's own JetStream.
	JS jetstream.JetStream
}

var (
	homeRegion  = region.Region{Name: relaytest.DomainA}
	otherRegion = region.Region{Name: relaytest.DomainB, HomeDomain: relaytest.DomainA}
)

// startRegions runs a system in each region, with its own fake upstream,
// edge and worker. Provider "mock" retries fast, and its breaker opens
// after 3 failures in a row, for 30s.
func startRegions(t *testing.T) (*relaytest.Regions, regionRun, regionRun) {
	t.Helper()
	rs := relaytest.TwoRegions(t)
	run := func(srv *server.Server, r region.Region) regionRun {
		sys := start(t, options{NATS: srv, Mock: mockupstream.Config{Tokens: 8}, Tune: func(c *config.Config) {
			c.Region = r
			p := &c.Providers[0]
			p.Retry = backoff.Config{Base: 5 * time.Millisecond, Cap: 10 * time.Millisecond, MaxRetries: 4}
			// A refused call fails at once rather than waiting for the
			// breaker.
			p.Breaker = breaker.Config{Failures: 3, Cooldown: 30 * time.Second, MaxWait: -1}
		}})
		_, state := relaytest.ConnectRegion(t, srv, streams.Topology{}, r)
		plain, err := jetstream.New(state.Conn())
		if err != nil {
			t.Fatal(err)
		}
		return regionRun{Name: r.Name, Edge: sys.Edge, Mock: sys.Mock, State: state, JS: plain}
	}
	a := run(rs.A, homeRegion)
	b := run(rs.B, otherRegion)
	return rs, a, b
}

// generate runs one generation through r's edge to its end and returns
// its stream id and what the client received; err is the edge's refusal
// (*httpError) if it did not start one.
func generate(t *testing.T, r regionRun, text string) (string, *transcript, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	msgs, _ := prompt(text, 8)
	s, err := openSSE(ctx, "POST", r.Edge+"/v1/chat/completions", chatBody(t, msgs, true), "")
	var refusal *httpError
	if errors.As(err, &refusal) {
		return "", nil, err
	}
	if err != nil {
		t.Fatalf("region %s: %v", r.Name, err)
	}
	defer s.Close()
	var tr transcript
	if err := tr.readUntil(s, 0); err != nil {
		t.Fatalf("region %s: %v", r.Name, err)
	}
	return s.resp.Header.Get("X-Relay-Stream-Id"), &tr, nil
}

// served runs a generation in r and fails the test unless r's provider
// answered it in full.
func served(t *testing.T, r regionRun, text string) string {
	t.Helper()
	id, tr, err := generate(t, r, text)
	if err != nil {
		t.Fatalf("region %s refused a generation: %v", r.Name, err)
	}
	if _, want := prompt(text, 8); tr.status != "done" || tr.text.String() != want {
		t.Fatalf("region %s: status %q (%s), text %q, want done and %q", r.Name, tr.status, tr.errType, tr.text.String(), want)
	}
	return id
}

// refused reports whether r refuses a generation because provider mock's
// breaker is open there, without calling its provider: the edge answers
// 503 at once (or the worker ends the stream failed).
func refused(t *testing.T, r regionRun, text string) bool {
	t.Helper()
	before := r.Mock.Stats().ChatRequests
	_, tr, err := generate(t, r, text)
	if r.Mock.Stats().ChatRequests > before {
		return false
	}
	var refusal *httpError
	if errors.As(err, &refusal) {
		return refusal.Status == http.StatusServiceUnavailable && strings.Contains(refusal.Body, "circuit breaker open")
	}
	return tr.status == "failed"
}

// tripBreaker makes r's provider fail until r's worker opens its breaker
// (three failures in a row, as the test sets it; it may take a few
// generations).
func tripBreaker(t *testing.T, r regionRun) {
	t.Helper()
	kv := sharedKV(t, r, wire.BreakerBucket)
	for i := 0; breakerPhase(t, kv) != breaker.Open; i++ {
		if i == 10 {
			t.Fatalf("region %s: the breaker did not open after %d failing generations", r.Name, i)
		}
		_, tr, err := generate(t, r, fmt.Sprintf("[[mock: status=503, times=0]] fail %d in %s", i, r.Name))
		if err != nil {
			t.Fatalf("region %s refused a generation before its breaker opened: %v", r.Name, err)
		}
		if tr.status != "failed" {
			t.Fatalf("region %s: a generation against a failing provider ended %q", r.Name, tr.status)
		}
	}
}

// breakerPhase is the phase of provider "mock"'s breaker as kv sees it.
func breakerPhase(t *testing.T, kv jetstream.KeyValue) breaker.Phase {
	t.Helper()
	e, err := kv.Get(context.Background(), mockOne)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return breaker.Closed
	}
	if err != nil {
		t.Fatalf("breaker: %v", err)
	}
	var s breaker.State
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		t.Fatalf("breaker: %v", err)
	}
	return s.Current()
}

func sharedKV(t *testing.T, r regionRun, bucket string) jetstream.KeyValue {
	t.Helper()
	kv, err := r.State.KeyValue(context.Background(), bucket)
	if err != nil {
		t.Fatalf("region %s, bucket %s: %v", r.Name, bucket, err)
	}
	return kv
}

// storedIn reports whether r's chunk log holds stream id.
func storedIn(t *testing.T, r regionRun, id string) bool {
	t.Helper()
	s, err := r.JS.Stream(context.Background(), wire.ChunkStreamOf(id))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.GetLastMsgForSubject(context.Background(), wire.ChunkSubject(id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// A breaker that region A's worker opens is enforced by region B's worker
// within 1s; each region serves and stores its own streams.
func TestRegionBreakerOpenedInAEnforcedInB(t *testing.T) {
	_, a, b := startRegions(t)

	idA, idB := served(t, a, "region a"), served(t, b, "region b")
	if !storedIn(t, a, idA) || storedIn(t, b, idA) || !storedIn(t, b, idB) || storedIn(t, a, idB) {
		t.Fatal("a region's stream was stored in the other region")
	}

	w, err := sharedKV(t, a, wire.BreakerBucket).Watch(context.Background(), mockOne, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	tripBreaker(t, a)
	var opened time.Time
	for opened.IsZero() {
		select {
		case e := <-w.Updates():
			var s breaker.State
			if e != nil && json.Unmarshal(e.Value(), &s) == nil && s.Current() == breaker.Open {
				opened = e.Created()
			}
		case <-time.After(5 * time.Second):
			t.Fatal("region a's worker did not open the breaker")
		}
	}
	relaytest.Eventually(t, time.Second, 5*time.Millisecond, func() bool { return refused(t, b, "region b after the trip") })
	t.Logf("a breaker opened in region a was enforced in region b %v after it was stored", time.Since(opened).Round(time.Millisecond))
}

// Cut apart, each region keeps serving with its last known state and acts
// on its own failures; after the heal, the state reconciles (last writer
// wins, key by key): B's trip reaches A.
func TestRegionPartitionAndHeal(t *testing.T) {
	rs, a, b := startRegions(t)
	inA, inB := sharedKV(t, a, wire.BreakerBucket), sharedKV(t, b, wire.BreakerBucket)

	rs.Link.Cut()
	relaytest.Eventually(t, 5*time.Second, 5*time.Millisecond, func() bool { return !rs.Joined() })

	// Both regions keep serving their clients.
	served(t, b, "b during the partition")
	served(t, a, "a during the partition")

	// B's own failures open the breaker in B (its overlay); B enforces it,
	// A does not know.
	tripBreaker(t, b)
	if !refused(t, b, "b after its trip") {
		t.Fatal("region b does not enforce its own trip during the partition")
	}
	if p := breakerPhase(t, inA); p != breaker.Closed {
		t.Fatalf("region a sees the breaker %s during the partition", p)
	}
	served(t, a, "a after b's trip")

	rs.Link.Heal()
	start := time.Now()
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		return breakerPhase(t, inA) == breaker.Open && breakerPhase(t, inB) == breaker.Open
	})
	healed := time.Since(start)
	overlay := inB.(*region.RegionalKV).Overlay()
	relaytest.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		e, err := overlay.Get(context.Background(), "mock")
		return errors.Is(err, jetstream.ErrKeyNotFound) && e == nil
	})
	t.Logf("b's trip reached a %v after the heal; b's overlay let go of it %v after", healed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	// Each region's roles see the record through their own watches, which
	// a loaded machine may deliver a second or more after the bucket has
	// it: the bound is generous, speed is the benchmark's to measure.
	relaytest.Eventually(t, 5*time.Second, 5*time.Millisecond, func() bool { return refused(t, a, "a after the heal") })
	// b's workers follow the overlay's release and the mirror's record as
	// two watches: for a moment after the release they may not see the
	// open breaker yet.
	relaytest.Eventually(t, 5*time.Second, 5*time.Millisecond, func() bool { return refused(t, b, "b after the heal") })
}
