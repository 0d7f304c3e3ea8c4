package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/fleet/slots"
	"github.com/relaydev/relay/relay/wire"
	"net/http"
)

// tenantGate shares the workers' slots fairly between tenants (the policy
// is package slots): a new generation starts at once while its tenant holds
// less than its share, and otherwise waits here, in its tenant's line,
// until it does. So a tenant's backlog waits at the edges rather than in
// the work queue, where it would be ahead of every other tenant's
// requests; the queue only holds what the workers are about to take.
//
// The gate sees the fleet through the workers' heartbeats
// (wire.LivenessSubject): each carries the worker's capacity and the
// stream and tenant of each request it holds. A generation this edge let
// start counts for its tenant from that moment until a heartbeat shows it
// ended, or a client here is sent its end frame; until a heartbeat lists
// it, at the latest takenWithin, it counts as started here, and then as
// the worker's.
//
// The shares are the fleet's, not an edge's: every edge tells the others
// on wire.GateSubject, at most every gateDebounce and at least every
// gateRefresh, how many requests of each tenant wait in its lines, how
// many it let start that no heartbeat lists yet, and how many it holds.
// So an edge that holds only one tenant's backlog sees that another
// tenant waits elsewhere and stops letting the first past its share. A
// tenant's share is split between the edges that hold or want its
// generations (slots.Split), in whole slots that every edge computes
// alike, so edges that decide at the same moment do not together let it
// past its share: when one of its generations ends, the edge that let it
// start lets the next one in. Where the other edges are, a request in a
// line waits gateSettle before its turn, for the edges to hear of each
// other's lines; only the first request of a tenant that runs nothing,
// or one that finds room in the fleet beyond what every edge could let
// start before it hears of the others, starts without a line. An edge
// not heard for gatePeerSilence counts no more: with no other edge, or
// none heard, the gate decides from what this edge sees, as one edge
// alone does.
//
// Until a heartbeat was heard (no worker yet, or liveness turned off)
// every request starts at once, as it would without the gate. A request
// waits for its turn at most edge.turn_wait, then is refused with a 429
// and Retry-After: a tenant's backlog cannot hold its clients' connections
// without end.
type tenantGate struct {
	// caps are the tenants' concurrency caps (coordinator.
	// tenant_max_concurrent); nil: none.
	caps func() quota.Limits
	// maxWait bounds a request's wait for its turn; negative: no bound.
	maxWait time.Duration

	mu   sync.Mutex
	load slots.Load
	// mine are the generations this edge let start and no heartbeat
	// showed ended, by stream id; held counts them by tenant, and
	// unlisted those of them no worker listed yet.
	mine           map[string]*ownGen
	held, unlisted map[string]int
	// lines are the waiting requests, by tenant, first come first.
	lines map[string][]*gateWaiter

	// node names this edge on wire.GateSubject; peers are the other edges, by
	// node. publish, set while the gate follows the fleet, sends this
	// edge's report; sent is when it last did, and unannounced counts
	// the generations let start since.
	node        string
	peers       map[string]*gatePeer
	publish     func([]byte)
	sent        time.Time
	sending     *time.Timer
	unannounced int
	// wake lets the lines' first requests in once they settled.
	wake *time.Timer
}

// ownGen is one generation let start here; listed: a heartbeat lists it.
type ownGen struct {
	tenant string
	at     time.Time
	listed bool
}

// gateWaiter is one request waiting for its turn since since; admitted is
// closed when it has it.
type gateWaiter struct {
	id       string
	since    time.Time
	admitted chan struct{}
}

// gatePeer is another edge, as it last told.
type gatePeer struct {
	tenants map[string]gateCounts
	heard   time.Time
}

// gateReport is what an edge tells the others on wire.GateSubject.
type gateReport struct {
	Node    string                `json:"node"`
	Tenants map[string]gateCounts `json:"tenants,omitempty"`
	// Leaving says the edge stops: count it no more.
	Leaving bool `json:"leaving,omitempty"`
}

// gateCounts are one tenant's requests at one edge.
type gateCounts struct {
	// Waiting wait in its line; Started were let start and no
	// heartbeat lists them yet; Held were let start and did not end.
	Waiting int `json:"waiting,omitempty"`
	Started int `json:"started,omitempty"`
	Held    int `json:"held,omitempty"`
}

const (
	// gateDebounce spaces an edge's reports: a burst of requests makes
	// one report, sent at most this long after its first change.
	gateDebounce = 50 * time.Millisecond
	// gateRefresh is how often an edge reports with nothing changed, and
	// gatePeerSilence how long an edge counts after its last report.
	gateRefresh     = time.Second
	gatePeerSilence = 3 * gateRefresh
	// gateSettle is how long a request in a line waits before its turn
	// where other edges are: the others' reports of the same moments
	// arrive meanwhile, so that every edge splits a share alike.
	gateSettle = 2 * gateDebounce
)

// takenWithin bounds how long a generation let start counts as its
// tenant's without a sign that a worker took it: long enough for a queue
// that other edges filled, short enough that a lost heartbeat does not
// hold a tenant back for long.
const takenWithin = 30 * time.Second

func newTenantGate(caps func() quota.Limits, maxWait time.Duration) *tenantGate {
	return &tenantGate{caps: caps, maxWait: maxWait, mine: map[string]*ownGen{}, held: map[string]int{}, unlisted: map[string]int{},
		lines: map[string][]*gateWaiter{}, peers: map[string]*gatePeer{}}
}

// CodeTurnWaitExceeded refuses a request that waited edge.turn_wait for
// its tenant's turn among the workers' slots (429).
const CodeTurnWaitExceeded = "turn_wait_exceeded"

// turnRetry is the Retry-After of a request refused its turn: the tenant's
// generations end and free slots all the time.
const turnRetry = time.Second

// follow feeds the gate with the workers' heartbeats and the other
// edges' reports, and reports this edge's lines as node, until ctx ends.
func (g *tenantGate) follow(ctx context.Context, nc *nats.Conn, node string) error {
	g.mu.Lock()
	g.node = node
	g.publish = func(data []byte) { _ = nc.Publish(wire.GateSubject(node), data) }
	g.mu.Unlock()
	defer g.leave()
	sub, err := nc.Subscribe(wire.LivenessSubject, func(m *nats.Msg) {
		var hb wire.Heartbeat
		if json.Unmarshal(m.Data, &hb) != nil {
			return
		}
		g.heard(hb, time.Now())
	})
	if err != nil {
		return fmt.Errorf("edge: following worker heartbeats: %w", err)
	}
	defer sub.Unsubscribe()
	edges, err := nc.Subscribe(wire.GateSubjects, func(m *nats.Msg) {
		var r gateReport
		if json.Unmarshal(m.Data, &r) != nil || r.Node == "" {
			return
		}
		g.heardEdge(r, time.Now())
	})
	if err != nil {
		return fmt.Errorf("edge: following the other edges' lines: %w", err)
	}
	defer edges.Unsubscribe()
	tick := time.NewTicker(gateRefresh)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			g.expire(now)
		}
	}
}

// leave tells the other edges this one stops, and stops reporting.
func (g *tenantGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.publish != nil {
		g.publish(marshal(gateReport{Node: g.node, Leaving: true}))
	}
	g.publish = nil
	for _, t := range []*time.Timer{g.sending, g.wake} {
		if t != nil {
			t.Stop()
		}
	}
	g.sending, g.wake = nil, nil
}

// heard applies one heartbeat and lets in whoever may start now.
func (g *tenantGate) heard(hb wire.Heartbeat, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := g.load.Observe(hb, now)
	for _, id := range seen.Taken {
		if o := g.mine[id]; o != nil && !o.listed {
			o.listed = true
			decrement(g.unlisted, o.tenant)
		}
	}
	for _, id := range seen.Ended {
		g.drop(id)
	}
	g.orphaned(seen.Orphaned, now)
	g.dispatch()
	g.changed()
}

// heardEdge applies another edge's report.
func (g *tenantGate) heardEdge(r gateReport, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.Node == g.node {
		return
	}
	if r.Leaving {
		delete(g.peers, r.Node)
	} else {
		p := g.peers[r.Node]
		if p == nil {
			// A new edge learns this one's lines at once.
			p = &gatePeer{}
			g.peers[r.Node] = p
			g.changed()
		}
		p.tenants, p.heard = r.Tenants, now
	}
	g.dispatch()
}

// orphaned counts this edge's generations that a worker held as let start
// again: the worker left or fell silent, and they are handed over.
func (g *tenantGate) orphaned(ids []string, now time.Time) {
	for _, id := range ids {
		if o := g.mine[id]; o != nil && o.listed {
			o.listed, o.at = false, now
			g.unlisted[o.tenant]++
		}
	}
}

// expire forgets silent workers and edges, and generations never seen
// taken, and reports this edge's lines.
func (g *tenantGate) expire(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.orphaned(g.load.Expire(now), now)
	for id, o := range g.mine {
		if !o.listed && now.Sub(o.at) > takenWithin {
			g.drop(id)
		}
	}
	for node, p := range g.peers {
		if now.Sub(p.heard) > gatePeerSilence {
			delete(g.peers, node)
		}
	}
	g.dispatch()
	if g.publish != nil && g.sending == nil {
		g.send()
	}
}

// forget stops counting generation id as let start here: it was not
// queued after all, or a client here was sent its end frame.
func (g *tenantGate) forget(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.mine[id]; ok {
		g.drop(id)
		g.dispatch()
		g.changed()
	}
}

// let counts generation id of tenant as let start here. g.mu is held.
func (g *tenantGate) let(id, tenant string, now time.Time) {
	g.mine[id] = &ownGen{tenant: tenant, at: now}
	g.held[tenant]++
	g.unlisted[tenant]++
	g.unannounced++
}

// drop stops counting generation id. g.mu is held.
func (g *tenantGate) drop(id string) {
	o := g.mine[id]
	if o == nil {
		return
	}
	delete(g.mine, id)
	decrement(g.held, o.tenant)
	if !o.listed {
		decrement(g.unlisted, o.tenant)
	}
}

// decrement counts one less of key, forgetting it at zero.
func decrement(m map[string]int, key string) {
	if m[key]--; m[key] <= 0 {
		delete(m, key)
	}
}

// changed reports this edge's lines to the others, at once if the last
// report is gateDebounce old, else when it is. g.mu is held.
func (g *tenantGate) changed() {
	if g.publish == nil || g.sending != nil {
		return
	}
	if wait := gateDebounce - time.Since(g.sent); wait > 0 {
		g.sending = time.AfterFunc(wait, func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.sending != nil {
				g.sending = nil
				g.send()
			}
		})
		return
	}
	g.send()
}

// send reports this edge's lines now. g.mu is held.
func (g *tenantGate) send() {
	if g.publish == nil {
		return
	}
	r := gateReport{Node: g.node, Tenants: make(map[string]gateCounts, len(g.held)+len(g.lines))}
	for name, n := range g.held {
		c := r.Tenants[name]
		c.Held = n
		r.Tenants[name] = c
	}
	for name, n := range g.unlisted {
		c := r.Tenants[name]
		c.Started = n
		r.Tenants[name] = c
	}
	for name, line := range g.lines {
		c := r.Tenants[name]
		c.Waiting = len(line)
		r.Tenants[name] = c
	}
	g.publish(marshal(r))
	g.sent, g.unannounced = time.Now(), 0
}

// wakeAt runs dispatch at at, unless a wake is due already. g.mu is held.
func (g *tenantGate) wakeAt(at time.Time) {
	if g.wake != nil || g.publish == nil {
		return
	}
	g.wake = time.AfterFunc(time.Until(at), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.wake != nil {
			g.wake = nil
			g.dispatch()
		}
	})
}

// enter waits until tenant may start generation id, or ctx ends. Once it
// returned nil, the generation counts as tenant's: call forget if it is
// not queued after all.
func (g *tenantGate) enter(ctx context.Context, tenant, id string) *wire.Error {
	g.mu.Lock()
	now := time.Now()
	if g.startsNow(tenant) {
		g.let(id, tenant, now)
		g.changed()
		g.mu.Unlock()
		return nil
	}
	w := &gateWaiter{id: id, since: now, admitted: make(chan struct{})}
	g.lines[tenant] = append(g.lines[tenant], w)
	if len(g.peers) > 0 {
		g.wakeAt(now.Add(gateSettle))
	}
	g.changed()
	g.mu.Unlock()
	var expired <-chan time.Time
	if g.maxWait >= 0 {
		t := time.NewTimer(g.maxWait)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-w.admitted:
		return nil
	case <-ctx.Done():
	case <-expired:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.admitted:
		g.drop(id)
	default:
		line := g.lines[tenant]
		for i, x := range line {
			if x == w {
				g.lines[tenant] = append(line[:i:i], line[i+1:]...)
				break
			}
		}
		if len(g.lines[tenant]) == 0 {
			delete(g.lines, tenant)
		}
	}
	g.dispatch()
	g.changed()
	if ctx.Err() == nil {
		return &wire.Error{
			Message: fmt.Sprintf("This API key's tenant has as many generations running as its share of the workers allows, "+
				"and this request waited %v for its turn; retry shortly.", g.maxWait),
			Type:         "requests",
			Code:         CodeTurnWaitExceeded,
			Status:       http.StatusTooManyRequests,
			RetryAfterMS: turnRetry.Milliseconds(),
		}
	}
	return &wire.Error{
		Message: "The request was given up while it waited for its turn: " + context.Cause(ctx).Error(),
		Type:    wire.TypeCancelled,
		Code:    string(wire.StatusCancelled),
		Status:  statusClientClosedRequest,
	}
}

// statusClientClosedRequest is nginx's "client closed request": the
// status of a request its client gave up.
const statusClientClosedRequest = 499

// parts is every tenant's part in a decision, the fleet's: what the
// workers hold, what this edge and the others let start that no worker
// lists yet, and the requests waiting here and there; and the fleet's
// capacity and total of generations. g.mu is held.
func (g *tenantGate) parts() (capacity, total int, tenants map[string]slots.Tenant) {
	capacity, total, running := g.load.Tally()
	tenants = make(map[string]slots.Tenant, len(running)+len(g.lines))
	add := func(name string, used, waiting int) {
		t, ok := tenants[name]
		if !ok && g.caps != nil {
			t.Cap = g.caps().ConcurrencyOf(name)
		}
		t.Used += used
		t.Waiting += waiting
		tenants[name] = t
	}
	for name, n := range running {
		add(name, n, 0)
	}
	for name, n := range g.unlisted {
		add(name, n, 0)
		total += n
	}
	for name, line := range g.lines {
		add(name, 0, len(line))
	}
	for _, p := range g.peers {
		for name, c := range p.tenants {
			add(name, c.Started, c.Waiting)
			total += c.Started
		}
	}
	return capacity, total, tenants
}

// startsNow reports whether a request of tenant may start without a line.
// Where other edges are, only the first of a tenant that runs nothing and
// waits nowhere does, or one that finds more room in the fleet than every
// edge could have let start since it last reported. g.mu is held.
func (g *tenantGate) startsNow(tenant string) bool {
	if len(g.lines[tenant]) > 0 {
		return false
	}
	capacity, total, tenants := g.parts()
	if !g.admits(capacity, total, tenants, tenant, true) {
		return false
	}
	t := tenants[tenant]
	edges := len(g.peers) + 1
	return edges == 1 || capacity <= 0 ||
		t.Waiting == 0 && (t.Used == 0 || total+edges*(g.unannounced+1) <= capacity-slots.Reserve)
}

// admits reports whether tenant may start a generation now, in the fleet
// and, where other edges are, within this edge's part of the tenant's
// share; asking: for a request in no line, which counts in its tenant's
// demand. g.mu is held.
func (g *tenantGate) admits(capacity, total int, tenants map[string]slots.Tenant, tenant string, asking bool) bool {
	t, ok := tenants[tenant]
	if !ok && g.caps != nil {
		t.Cap = g.caps().ConcurrencyOf(tenant)
	}
	if asking {
		tenants = maps.Clone(tenants)
		t.Waiting++
	}
	tenants[tenant] = t
	if !slots.Admit(capacity, total, tenants, tenant) {
		return false
	}
	if len(g.peers) == 0 || capacity <= 0 || t.Used == 0 {
		return true
	}
	share := slots.Shares(capacity-slots.Reserve, tenants)[tenant]
	edges := map[string]slots.Tenant{g.node: {Used: g.held[tenant], Waiting: len(g.lines[tenant])}}
	if asking {
		edges[g.node] = slots.Tenant{Used: g.held[tenant], Waiting: len(g.lines[tenant]) + 1}
	}
	for node, p := range g.peers {
		if c, ok := p.tenants[tenant]; ok {
			edges[node] = slots.Tenant{Used: c.Held, Waiting: c.Waiting}
		}
	}
	return g.held[tenant] < slots.Split(share, edges)[g.node]
}

// dispatch lets in the waiting requests that may start now, the tenant
// furthest below its share first. The first tenant the fleet admits has
// the turn: where it waits at another edge, or its part here is full, or
// its first request here has not settled, nobody else is let in here
// (the other edge lets it in). g.mu is held.
func (g *tenantGate) dispatch() {
	now := time.Now()
	let := false
	defer func() {
		if let {
			g.changed()
		}
	}()
	for len(g.lines) > 0 {
		capacity, total, tenants := g.parts()
		name, ok := g.turn(capacity, total, tenants)
		if !ok {
			return
		}
		line := g.lines[name]
		if len(line) == 0 {
			return
		}
		if len(g.peers) > 0 {
			if ready := line[0].since.Add(gateSettle); now.Before(ready) {
				g.wakeAt(ready)
				return
			}
			if !g.admits(capacity, total, tenants, name, false) {
				return
			}
		}
		w := line[0]
		if len(line) == 1 {
			delete(g.lines, name)
		} else {
			g.lines[name] = line[1:]
		}
		g.let(w.id, name, now)
		close(w.admitted)
		let = true
	}
}

// turn is the tenant waiting somewhere in the fleet that may start a
// generation next, if any. g.mu is held.
func (g *tenantGate) turn(capacity, total int, tenants map[string]slots.Tenant) (string, bool) {
	for _, name := range slots.Next(capacity-slots.Reserve, tenants) {
		if slots.Admit(capacity, total, tenants, name) {
			return name, true
		}
	}
	return "", false
}
