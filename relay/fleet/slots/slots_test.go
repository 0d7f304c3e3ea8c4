package slots

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// A tenant running nothing always gets its first generation in, even when
// the others hold every usable slot: it takes the reserve.
func TestNewcomerTakesTheReserve(t *testing.T) {
	tenants := map[string]Tenant{"a": {Used: 7, Waiting: 93}, "b": {}}
	if Admit(8, 7, tenants, "a") {
		t.Error("a, at the usable slots (8 less the reserve of 1), was let in")
	}
	if !Admit(8, 7, tenants, "b") {
		t.Error("b, running nothing, was held back")
	}
}

// Under saturation the slots go to the tenant furthest below its share,
// until the shares are even.
func TestSaturatedSlotsGoToTheTenantBelowItsShare(t *testing.T) {
	// 10 slots, 1 reserved: 9 usable; a holds 6, b 2, both want more.
	tenants := map[string]Tenant{"a": {Used: 6, Waiting: 50}, "b": {Used: 2, Waiting: 5}}
	if Admit(10, 8, tenants, "a") {
		t.Error("a, over its share of 4.5, was let in")
	}
	if !Admit(10, 8, tenants, "b") {
		t.Error("b, under its share of 4.5, was held back")
	}
	if got := Next(9, tenants); len(got) != 2 || got[0] != "b" {
		t.Errorf("order of the waiting tenants: %v, want b first", got)
	}
	if Admit(10, 9, map[string]Tenant{"a": {Used: 6}, "b": {Used: 3, Waiting: 5}}, "b") {
		t.Error("b was let in with no usable slot left")
	}
}

// A tenant alone uses every slot but the reserve: sharing costs a lone
// tenant nothing else.
func TestLoneTenantUsesAllButTheReserve(t *testing.T) {
	tenants := map[string]Tenant{"a": {Used: 18, Waiting: 100}}
	if !Admit(20, 18, tenants, "a") {
		t.Error("a, alone with 18 of 19 usable slots, was held back")
	}
	tenants["a"] = Tenant{Used: 19, Waiting: 100}
	if Admit(20, 19, tenants, "a") {
		t.Error("a took the reserve")
	}
}

func TestCapHoldsEvenWithFreeSlots(t *testing.T) {
	tenants := map[string]Tenant{"a": {Used: 2, Waiting: 3, Cap: 2}}
	if Admit(100, 2, tenants, "a") {
		t.Error("a was let over its cap of 2")
	}
	if !Admit(100, 2, map[string]Tenant{"a": {Used: 1, Cap: 2}}, "a") {
		t.Error("a was held back under its cap")
	}
}

func TestUnknownCapacityAdmitsEverything(t *testing.T) {
	if !Admit(0, 500, map[string]Tenant{"a": {Used: 500, Waiting: 10}}, "a") {
		t.Error("with no heartbeat heard, a request was held back")
	}
}

func TestSharesWaterFill(t *testing.T) {
	got := Shares(10, map[string]Tenant{"a": {Used: 1}, "b": {Used: 3, Waiting: 20}, "c": {Used: 2, Waiting: 20, Cap: 3}})
	want := map[string]float64{"a": 1, "c": 3, "b": 6}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("share of %s: %v, want %v (all: %v)", name, got[name], w, got)
		}
	}
}

// The load follows full heartbeats and deltas, forgets leaving and silent
// workers, and counts what no listed delivery names as unknown.
func TestLoadFollowsHeartbeats(t *testing.T) {
	var l Load
	now := time.Unix(1000, 0)
	seen := l.Observe(wire.Heartbeat{Instance: "w1", Capacity: 4, Full: true, Held: 2, Deliveries: []wire.Delivery{
		{StreamID: "s1", Seq: 1, Tenant: "a"}, {StreamID: "s2", Seq: 2, Tenant: "b"},
	}}, now)
	if len(seen.Taken) != 2 || len(seen.Ended) != 0 {
		t.Fatalf("seen: %+v", seen)
	}
	seen = l.Observe(wire.Heartbeat{Instance: "w1", Capacity: 4, Held: 2, Added: []wire.Delivery{{StreamID: "s3", Seq: 3, Tenant: "a"}},
		Removed: []wire.DeliveryRef{{Seq: 2}}}, now)
	if !slices.Equal(seen.Taken, []string{"s3"}) || !slices.Equal(seen.Ended, []string{"s2"}) {
		t.Fatalf("seen: %+v", seen)
	}
	// w2's set is not known yet: it holds 3 of unknown tenants.
	l.Observe(wire.Heartbeat{Instance: "w2", Capacity: 6, Held: 3}, now)
	capacity, held, by := l.Tally()
	if capacity != 10 || held != 5 || by["a"] != 2 || by["b"] != 0 {
		t.Errorf("tally: capacity %d, held %d, by tenant %v", capacity, held, by)
	}
	if seen := l.Observe(wire.Heartbeat{Instance: "w1", Leaving: true}, now); len(seen.Orphaned) != 2 {
		t.Errorf("w1 left holding s1 and s3; orphaned %v", seen.Orphaned)
	}
	l.Expire(now.Add(3*wire.DefaultLivenessTimeout + time.Second))
	if capacity, held, _ := l.Tally(); capacity != 0 || held != 0 {
		t.Errorf("after w1 left and w2 fell silent: capacity %d, held %d", capacity, held)
	}
}

// The totals kept as heartbeats come are those of the workers' sets:
// deltas that re-list, remove unknown requests or change a tenant, full
// beats, leaving and silent workers.
func TestLoadTotalsFollowTheSets(t *testing.T) {
	var l Load
	now := time.Unix(1000, 0)
	d := func(seq uint64, tenant string) wire.Delivery {
		return wire.Delivery{StreamID: fmt.Sprint("s", seq), Seq: seq, Tenant: tenant}
	}
	beats := []wire.Heartbeat{
		{Instance: "w1", Capacity: 4, Full: true, Held: 2, Deliveries: []wire.Delivery{d(1, "a"), d(2, "b")}},
		{Instance: "w2", Capacity: 6, Held: 5, Added: []wire.Delivery{d(10, "a")}},
		{Instance: "w1", Capacity: 4, Held: 3, Added: []wire.Delivery{d(2, "c"), d(3, "a")}, Removed: []wire.DeliveryRef{{Seq: 99}}},
		{Instance: "w2", Capacity: 8, Full: true, Held: 1, Deliveries: []wire.Delivery{d(11, "b")}},
		{Instance: "w1", Capacity: 4, Held: 1, Removed: []wire.DeliveryRef{{Seq: 1}, {Seq: 2}}},
	}
	for _, hb := range beats {
		l.Observe(hb, now)
		check(t, &l)
	}
	capacity, held, by := l.Tally()
	if capacity != 12 || held != 2 || by["a"] != 1 || by["b"] != 1 || len(by) != 2 {
		t.Fatalf("tally: capacity %d, held %d, by tenant %v", capacity, held, by)
	}
	l.Observe(wire.Heartbeat{Instance: "w2", Leaving: true}, now)
	check(t, &l)
	l.Expire(now.Add(time.Hour))
	if capacity, held, by := l.Tally(); capacity != 0 || held != 0 || len(by) != 0 {
		t.Fatalf("empty fleet: capacity %d, held %d, by tenant %v", capacity, held, by)
	}
}

// check compares the kept totals with the workers' sets counted anew.
func check(t *testing.T, l *Load) {
	t.Helper()
	capacity, held, by := 0, 0, map[string]int{}
	for _, w := range l.workers {
		capacity += w.capacity
		held += w.counted()
		for _, r := range w.listed {
			by[r.tenant]++
		}
	}
	gotCap, gotHeld, gotBy := l.Tally()
	if gotCap != capacity || gotHeld != held || !maps.Equal(gotBy, by) {
		t.Fatalf("kept %d, %d, %v; counted %d, %d, %v", gotCap, gotHeld, gotBy, capacity, held, by)
	}
}

// A tenant's share is split between the edges in whole slots that add up
// to it, the same on every edge: an edge that wants less than an even
// split gets what it wants.
func TestSplitBetweenEdges(t *testing.T) {
	for _, c := range []struct {
		share float64
		edges map[string]Tenant
		want  map[string]int
	}{
		{3, map[string]Tenant{"e1": {Used: 1, Waiting: 11}, "e2": {Used: 1, Waiting: 11}, "e3": {Used: 1, Waiting: 11}}, map[string]int{"e1": 1, "e2": 1, "e3": 1}},
		{3, map[string]Tenant{"e1": {Waiting: 10}, "e2": {Waiting: 10}}, map[string]int{"e1": 2, "e2": 1}},
		{5, map[string]Tenant{"e1": {Used: 1}, "e2": {Used: 1, Waiting: 10}, "e3": {Waiting: 10}}, map[string]int{"e1": 1, "e2": 2, "e3": 2}},
		{2.5, map[string]Tenant{"e1": {Waiting: 10}, "e2": {Waiting: 10}}, map[string]int{"e1": 2, "e2": 1}},
		{4, map[string]Tenant{"e1": {Waiting: 1}, "e2": {Used: 1}}, map[string]int{"e1": 1, "e2": 1}},
	} {
		if got := Split(c.share, c.edges); !maps.Equal(got, c.want) {
			t.Errorf("Split(%v, %v) = %v, want %v", c.share, c.edges, got, c.want)
		}
	}
}
