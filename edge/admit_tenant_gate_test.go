package edge

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/wire"
	"net/http"
	"testing/synctest"
)

// beat is a full heartbeat of one worker of capacity 4 holding streams
// (id → tenant).
func beat(n uint64, streams map[string]string) wire.Heartbeat {
	hb := wire.Heartbeat{Instance: "w1", Beat: n, Full: true, Capacity: 4, Held: len(streams)}
	seq := uint64(0)
	for id, tenant := range streams {
		seq++
		hb.Deliveries = append(hb.Deliveries, wire.Delivery{StreamID: id, Seq: seq, Tenant: tenant})
	}
	return hb
}

// A request over its tenant's share waits in its line and is let in when
// a heartbeat shows a slot freed; the newcomer is let in at once.
func TestTenantGateLine(t *testing.T) {
	g := newTenantGate(nil, -1)
	ctx := context.Background()
	if e := g.enter(ctx, "a", "before-any-beat"); e != nil {
		t.Fatalf("with no heartbeat heard: %v", e)
	}
	g.forget("before-any-beat")
	g.heard(beat(1, map[string]string{"s1": "a", "s2": "a", "s3": "a"}), time.Now())

	waited := make(chan *wire.Error, 1)
	go func() { waited <- g.enter(ctx, "a", "s4") }()
	waitFor(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.lines["a"]) == 1
	})
	if e := g.enter(ctx, "b", "s5"); e != nil {
		t.Fatalf("newcomer b: %v", e)
	}
	select {
	case e := <-waited:
		t.Fatalf("a's fourth request passed the reserve: %v", e)
	default:
	}
	// s1 ended, and b's took a slot: a holds 2 of its share of 3, and the
	// fleet 3 of 3 usable, with b's counted. Still full.
	g.heard(beat(2, map[string]string{"s2": "a", "s3": "a", "s5": "b"}), time.Now())
	select {
	case e := <-waited:
		t.Fatalf("let in with no usable slot: %v", e)
	default:
	}
	g.heard(beat(3, map[string]string{"s3": "a", "s5": "b"}), time.Now())
	if e := <-waited; e != nil {
		t.Fatalf("a's waiting request: %v", e)
	}
}

// A client that gives up leaves its line, and is counted nowhere.
func TestTenantGateGivenUp(t *testing.T) {
	g := newTenantGate(func() quota.Limits { return quota.Limits{MaxConcurrent: 1} }, -1)
	g.heard(beat(1, map[string]string{"s1": "a"}), time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan *wire.Error, 1)
	go func() { waited <- g.enter(ctx, "a", "s2") }()
	waitFor(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.lines["a"]) == 1
	})
	cancel()
	e := <-waited
	if e == nil || e.Status != statusClientClosedRequest || !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("given up: %+v", e)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.lines) != 0 || len(g.started) != 0 {
		t.Fatalf("left behind: lines %v, started %v", g.lines, g.started)
	}
}

// A request that waited edge.turn_wait for its turn is refused with a 429
// and a Retry-After, and leaves its line.
func TestTenantGateWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newTenantGate(func() quota.Limits { return quota.Limits{MaxConcurrent: 1} }, time.Minute)
		g.heard(beat(1, map[string]string{"s1": "a"}), time.Now())
		start := time.Now()
		e := g.enter(context.Background(), "a", "s2")
		if e == nil || e.Status != http.StatusTooManyRequests || e.Code != CodeTurnWaitExceeded || e.RetryAfterMS <= 0 {
			t.Fatalf("after its wait: %+v", e)
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Errorf("refused after %v; want edge.turn_wait, 1m", waited)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.lines) != 0 || len(g.started) != 0 {
			t.Errorf("left behind: lines %v, started %v", g.lines, g.started)
		}
	})
}
