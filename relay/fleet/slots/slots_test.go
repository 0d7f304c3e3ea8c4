package slots

import (
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
	taken := l.Observe(wire.Heartbeat{Instance: "w1", Capacity: 4, Full: true, Held: 2, Deliveries: []wire.Delivery{
		{StreamID: "s1", Seq: 1, Tenant: "a"}, {StreamID: "s2", Seq: 2, Tenant: "b"},
	}}, now)
	if len(taken) != 2 {
		t.Fatalf("taken: %v", taken)
	}
	l.Observe(wire.Heartbeat{Instance: "w1", Capacity: 4, Held: 2, Added: []wire.Delivery{{StreamID: "s3", Seq: 3, Tenant: "a"}},
		Removed: []wire.DeliveryRef{{Seq: 2}}}, now)
	// w2's set is not known yet: it holds 3 of unknown tenants.
	l.Observe(wire.Heartbeat{Instance: "w2", Capacity: 6, Held: 3}, now)
	capacity, held, by := l.Tally()
	if capacity != 10 || held != 5 || by["a"] != 2 || by["b"] != 0 {
		t.Errorf("tally: capacity %d, held %d, by tenant %v", capacity, held, by)
	}
	l.Observe(wire.Heartbeat{Instance: "w1", Leaving: true}, now)
	l.Expire(now.Add(3*wire.DefaultLivenessTimeout + time.Second))
	if capacity, held, _ := l.Tally(); capacity != 0 || held != 0 {
		t.Errorf("after w1 left and w2 fell silent: capacity %d, held %d", capacity, held)
	}
}
