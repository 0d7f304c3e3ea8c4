package edge

import (
	"context"
	"encoding/json"
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
	if len(g.lines) != 0 || len(g.mine) != 0 {
		t.Fatalf("left behind: lines %v, mine %v", g.lines, g.mine)
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
		if len(g.lines) != 0 || len(g.mine) != 0 {
			t.Errorf("left behind: lines %v, mine %v", g.lines, g.mine)
		}
	})
}

// fleetBeat is a full heartbeat of one worker of capacity 5.
func fleetBeat(n uint64, streams ...string) wire.Heartbeat {
	hb := wire.Heartbeat{Instance: "w1", Beat: n, Full: true, Capacity: 5, Held: len(streams)}
	for i, id := range streams {
		hb.Deliveries = append(hb.Deliveries, wire.Delivery{StreamID: id, Seq: uint64(i + 1), Tenant: id[:1]})
	}
	return hb
}

// linkGates makes the gates tell each other their lines, as the edges do on wire.GateSubjects.
func linkGates(gates map[string]*tenantGate) {
	for node, g := range gates {
		g.mu.Lock()
		g.node = node
		g.publish = func(data []byte) {
			var r gateReport
			if json.Unmarshal(data, &r) != nil {
				panic("malformed report")
			}
			for other, o := range gates {
				if other != node {
					go o.heardEdge(r, time.Now())
				}
			}
		}
		g.send()
		g.mu.Unlock()
	}
}

// The shares are the fleet's: an edge holding only a's backlog sees b's
// line at another edge, and a slot that frees goes to b there, not to a
// here.
func TestTenantGateSharesAcrossEdges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e1, e2 := newTenantGate(nil, -1), newTenantGate(nil, -1)
		linkGates(map[string]*tenantGate{"e1": e1, "e2": e2})
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		beat := func(hb wire.Heartbeat) {
			e1.heard(hb, time.Now())
			e2.heard(hb, time.Now())
			synctest.Wait()
		}
		for _, id := range []string{"a1", "a2", "a3", "a4"} {
			if e := e1.enter(ctx, "a", id); e != nil {
				t.Fatalf("%s before any heartbeat: %v", id, e)
			}
		}
		beat(fleetBeat(1, "a1", "a2", "a3", "a4"))
		// b runs nothing: its first request takes the reserve.
		if e := e2.enter(ctx, "b", "b1"); e != nil {
			t.Fatalf("b's first request: %v", e)
		}
		beat(fleetBeat(2, "a1", "a2", "a3", "a4", "b1"))
		admitted := map[string]chan *wire.Error{}
		for _, w := range []struct {
			g  *tenantGate
			id string
		}{{e1, "a5"}, {e1, "a6"}, {e1, "a7"}, {e2, "b2"}, {e2, "b3"}} {
			c := make(chan *wire.Error, 1)
			admitted[w.id] = c
			go func() { c <- w.g.enter(ctx, w.id[:1], w.id) }()
			synctest.Wait() // in its line before the next
		}
		time.Sleep(time.Second)
		synctest.Wait()
		for id, c := range admitted {
			if len(c) > 0 {
				t.Fatalf("%s let in with the fleet's usable slots full", id)
			}
		}
		// Two of a's end: a holds 2 of its share of 2, b 1 of 2.
		beat(fleetBeat(3, "a3", "a4", "b1"))
		time.Sleep(time.Second)
		synctest.Wait()
		if len(admitted["b2"]) == 0 {
			t.Error("b's second request, at its edge, waits while b is below its share")
		}
		for _, id := range []string{"a5", "a6", "a7", "b3"} {
			if len(admitted[id]) > 0 {
				t.Errorf("%s was let in past its tenant's share of the fleet", id)
			}
		}
		cancel()
		synctest.Wait()
		e1.leave()
		e2.leave()
	})
}
