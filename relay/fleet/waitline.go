package fleet

import "time"

// The calls that wait for a provider (an open breaker, a pause) stand in a
// line per scope on each worker. When the wait ends they are let go over
// the recovery window in the order they came: the i-th of n waiting calls
// draws its moment from the i-th n-th of the window. Every worker does the
// same with its own line, so the fleet's calls still spread over the whole
// window (full jitter, stratified), and no call that came early on a
// worker is overtaken there by one that came late.

// waitLine is one scope's line on this worker.
type waitLine struct {
	// last is the place given to the latest call to join.
	last uint64
	// waiting holds the places of the calls in the line.
	waiting map[uint64]struct{}
}

// joinLine puts the call at the end of its scope's line, once.
func (a *admission) joinLine() {
	if a.place != 0 {
		return
	}
	g := a.g
	g.mu.Lock()
	defer g.mu.Unlock()
	l := &g.scope(a.scope).line
	if l.waiting == nil {
		l.waiting = map[uint64]struct{}{}
	}
	l.last++
	a.place = l.last
	l.waiting[a.place] = struct{}{}
}

// leaveLine takes the call out of its line, if it joined one.
func (a *admission) leaveLine() {
	if a.place == 0 {
		return
	}
	g := a.g
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.scope(a.scope).line.waiting, a.place)
}

// releaseAt is how long after the end of its wait the call goes: a uniform
// draw from its slot of window, the slot of its rank in the line.
func (a *admission) releaseAt(window time.Duration) time.Duration {
	rank, n := 0, 1
	if a.place != 0 {
		g := a.g
		g.mu.Lock()
		l := &g.scope(a.scope).line
		n = max(len(l.waiting), 1)
		for p := range l.waiting {
			if p < a.place {
				rank++
			}
		}
		g.mu.Unlock()
	}
	slot := int64(window) / int64(n)
	return time.Duration(int64(rank)*slot + a.g.draw(max(slot, 1)))
}
