package slots

import (
	"maps"
	"math"
	"sort"
)

// Tenant is one tenant's part in a decision.
type Tenant struct {
	// Used are the tenant's generations the fleet runs, and those the
	// edges let start that no worker listed yet.
	Used int
	// Waiting are its requests waiting at the edges.
	Waiting int
	// Cap is its cap on concurrent generations; zero: none.
	Cap int
}

// demand is what t would run if it could.
func (t Tenant) demand() int {
	d := t.Used + t.Waiting
	if t.Cap > 0 {
		d = min(d, t.Cap)
	}
	return d
}

// Reserve is the part of the fleet's slots kept for tenants that run
// nothing: one slot. It lets a newcomer start at once while another tenant holds every
// other slot; beyond it, a newcomer's request waits in the queue for the
// next slot to free, ahead of every other tenant's backlog, which waits at
// the edges. More would cost a lone tenant slots for nothing: at 500
// streams on a worker of 516 slots, a reserve of a twentieth held 10 of
// them back until others ended (e2e/bench, the memory phase).
const Reserve = 1

// Admit reports whether tenant t may start a generation now, given the
// fleet's capacity, the generations it runs or were let start (total,
// every tenant's and unknown ones), and the tenants' parts:
//
//   - never over the tenant's cap;
//   - always when the fleet's capacity is unknown (no heartbeat heard:
//     the queue decides, as it would without sharing) or the tenant runs
//     nothing: its first generation may take the reserve;
//   - otherwise when the fleet has slots beyond the reserve and the
//     tenant holds less than its fair share of them (Shares).
func Admit(capacity, total int, tenants map[string]Tenant, t string) bool {
	d := tenants[t]
	switch {
	case d.Cap > 0 && d.Used >= d.Cap:
		return false
	case capacity <= 0 || d.Used == 0:
		return true
	}
	usable := capacity - Reserve
	if total >= usable {
		return false
	}
	if d.Waiting == 0 {
		// The request asking counts in its tenant's demand.
		tenants = maps.Clone(tenants)
		d.Waiting = 1
		tenants[t] = d
	}
	return float64(d.Used) < Shares(usable, tenants)[t]
}

// Shares splits usable slots over tenants by max-min fairness
// (water-filling): a tenant that wants less than an even split of what is
// left gets what it wants, and the others split the rest evenly.
func Shares(usable int, tenants map[string]Tenant) map[string]float64 {
	names := make([]string, 0, len(tenants))
	for name := range tenants {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return tenants[names[i]].demand() < tenants[names[j]].demand() })
	out := make(map[string]float64, len(names))
	left := float64(usable)
	for i, name := range names {
		give := min(float64(tenants[name].demand()), left/float64(len(names)-i))
		out[name] = give
		left -= give
	}
	return out
}

// Next picks, among the tenants with requests waiting, the one to admit
// first: the one that holds the least of its fair share.
func Next(usable int, tenants map[string]Tenant) []string {
	shares := Shares(usable, tenants)
	var waiting []string
	for name, t := range tenants {
		if t.Waiting > 0 {
			waiting = append(waiting, name)
		}
	}
	ratio := func(name string) float64 { return float64(tenants[name].Used) / max(shares[name], 1) }
	sort.Slice(waiting, func(i, j int) bool {
		if ri, rj := ratio(waiting[i]), ratio(waiting[j]); ri != rj {
			return ri < rj
		}
		return waiting[i] < waiting[j]
	})
	return waiting
}

// Split divides a tenant's share of the fleet's slots between the edges
// that hold or wait for its generations (edges: each one's part, Used its
// generations running or let start, Waiting its requests waiting there),
// in whole slots, so that edges deciding at the same moment do not
// together let the tenant past its share. A share with a fraction counts
// as the next whole slot, as Admit counts it. An edge gets what it wants
// when that is less than an even split of what is left (Shares); the
// slots left by rounding down go to the largest fractions, ties to the
// first edge by name, so every edge that knows the same counts finds the
// same parts.
func Split(share float64, edges map[string]Tenant) map[string]int {
	whole := int(math.Ceil(share - 1e-9))
	even := Shares(whole, edges)
	names := make([]string, 0, len(edges))
	parts := make(map[string]int, len(edges))
	left := whole
	for name, s := range even {
		parts[name] = int(s + 1e-9)
		left -= parts[name]
		names = append(names, name)
	}
	frac := func(name string) float64 { return even[name] - float64(parts[name]) }
	sort.Slice(names, func(i, j int) bool {
		if fi, fj := frac(names[i]), frac(names[j]); fi != fj {
			return fi > fj
		}
		return names[i] < names[j]
	})
	for _, name := range names {
		if left == 0 {
			break
		}
		if parts[name] < edges[name].demand() {
			parts[name]++
			left--
		}
	}
	return parts
}
