package coordinator

import (
	"sync"
	"time"

	"github.com/relaydev/relay/relay/fleet/quota"
)

// callTotals sums the fleet's calls per "<provider>/<model>" since the
// coordinator started, from each node's cumulative counts: a node's
// counts that went down (it restarted) count from zero again, and a node
// that left keeps what it added.
type callTotals struct {
	mu    sync.Mutex
	last  map[string]map[string]quota.Calls // node → target → last seen
	total map[string]quota.Calls
}

func newCallTotals() *callTotals {
	return &callTotals{last: map[string]map[string]quota.Calls{}, total: map[string]quota.Calls{}}
}

func (t *callTotals) add(r quota.Report) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.last[r.Node]
	if prev == nil {
		prev = map[string]quota.Calls{}
	}
	for target, c := range r.Calls {
		p, seen := prev[target]
		if seen && wentBack(c, p) {
			p = quota.Calls{}
		}
		sum := t.total[target]
		sum.Calls += c.Calls - p.Calls
		sum.Failures += c.Failures - p.Failures
		sum.Refused += c.Refused - p.Refused
		sum.Open += c.Open - p.Open
		sum.Streams += c.Streams - p.Streams
		sum.StreamFailures += c.StreamFailures - p.StreamFailures
		if c.LastFailure.After(sum.LastFailure) {
			sum.LastFailure, sum.LastError = c.LastFailure, c.LastError
		}
		t.total[target] = sum
		prev[target] = c
	}
	t.last[r.Node] = prev
}

// wentBack reports whether any of a node's counts c is below what it was
// (p): the node started again.
func wentBack(c, p quota.Calls) bool {
	return c.Calls < p.Calls || c.Failures < p.Failures || c.Refused < p.Refused || c.Open < p.Open ||
		c.Streams < p.Streams || c.StreamFailures < p.StreamFailures
}

// get returns the totals of target.
func (t *callTotals) get(target string) quota.Calls {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total[target]
}

// lastFailure is the latest failure of any target of provider.
func (t *callTotals) lastFailure(provider string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for target, c := range t.total {
		if len(target) > len(provider) && target[:len(provider)+1] == provider+"/" && c.LastFailure.After(last) {
			last = c.LastFailure
		}
	}
	return last
}
