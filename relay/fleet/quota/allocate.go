package quota

import "sort"

// reserveShare is the part of a limit that Allocate splits evenly over the
// nodes, whatever their demand, so that a node whose demand was zero at the
// last report can still start.
const reserveShare = 0.2

// Allocate splits limit (per minute) over the nodes in demand, by their
// demand (per minute): a fifth of the limit evenly, the rest by max-min
// fairness (water-filling): a node that wants less than an even split of
// what is left gets what it wants, the others split the rest evenly, and
// what nobody wants is split evenly too. Under saturation every node gets
// the same share, however its demand jitters from one report to the next,
// and a node that wants little leaves its part to the others. The shares
// add up to limit; no node, no shares.
func Allocate(limit float64, demand map[string]float64) map[string]float64 {
	if len(demand) == 0 {
		return nil
	}
	n := float64(len(demand))
	base := limit * reserveShare / n
	out := make(map[string]float64, len(demand))
	nodes := make([]string, 0, len(demand))
	for node := range demand {
		nodes = append(nodes, node)
		out[node] = base
	}
	want := func(node string) float64 { return max(demand[node]-base, 0) }
	sort.Slice(nodes, func(i, j int) bool { return want(nodes[i]) < want(nodes[j]) })
	left := limit - base*n
	for i, node := range nodes {
		level := left / float64(len(nodes)-i)
		give := min(want(node), level)
		out[node] += give
		left -= give
	}
	for _, node := range nodes {
		out[node] += left / n
	}
	return out
}

// Meter turns counts into a per-minute demand, smoothed over report
// intervals so that one quiet second does not hand a busy node's share
// away. The zero Meter is ready; it is not safe for concurrent use.
type Meter struct {
	count float64
	rate  float64
	seen  bool
}

// Add counts n.
func (m *Meter) Add(n float64) { m.count += n }

// Roll closes an interval of length seconds and returns the smoothed rate
// per minute: the mean of the last interval's rate and the previous
// smoothed rate.
func (m *Meter) Roll(seconds float64) float64 {
	if seconds <= 0 {
		return m.rate
	}
	r := m.count / seconds * 60
	if m.seen {
		r = (r + m.rate) / 2
	}
	m.rate, m.count, m.seen = r, 0, true
	return m.rate
}
