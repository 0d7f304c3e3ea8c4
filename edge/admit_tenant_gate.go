package edge

import (
	"context"
	"encoding/json"
	"fmt"
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
// tenant of each request it holds. A generation this edge let start counts
// for its tenant from that moment until a heartbeat lists it (it then
// counts as the worker's), or a client here is sent its end frame (it may
// end before a heartbeat lists it), or at the latest takenWithin later. Every edge
// counts every tenant's running generations alike, but sees only its own
// waiting requests: between edges, a tenant's share follows what it runs.
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
	// started are the generations this edge let start that no worker is
	// known to hold yet, by stream id.
	started map[string]startedGen
	// lines are the waiting requests, by tenant, first come first.
	lines map[string][]*gateWaiter
}

// startedGen is one generation let start here.
type startedGen struct {
	tenant string
	at     time.Time
}

// gateWaiter is one request waiting for its turn; admitted is closed when
// it has it.
type gateWaiter struct {
	id       string
	admitted chan struct{}
}

// takenWithin bounds how long a generation let start counts as its
// tenant's without a sign that a worker took it: long enough for a queue
// that other edges filled, short enough that a lost heartbeat does not
// hold a tenant back for long.
const takenWithin = 30 * time.Second

func newTenantGate(caps func() quota.Limits, maxWait time.Duration) *tenantGate {
	return &tenantGate{caps: caps, maxWait: maxWait, started: map[string]startedGen{}, lines: map[string][]*gateWaiter{}}
}

// CodeTurnWaitExceeded refuses a request that waited edge.turn_wait for
// its tenant's turn among the workers' slots (429).
const CodeTurnWaitExceeded = "turn_wait_exceeded"

// turnRetry is the Retry-After of a request refused its turn: the tenant's
// generations end and free slots all the time.
const turnRetry = time.Second

// follow feeds the gate with the workers' heartbeats until ctx ends.
func (g *tenantGate) follow(ctx context.Context, nc *nats.Conn) error {
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
	tick := time.NewTicker(time.Second)
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

// heard applies one heartbeat and lets in whoever may start now.
func (g *tenantGate) heard(hb wire.Heartbeat, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range g.load.Observe(hb, now) {
		delete(g.started, id)
	}
	g.dispatch()
}

// expire forgets silent workers and generations never seen taken.
func (g *tenantGate) expire(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.load.Expire(now)
	for id, s := range g.started {
		if now.Sub(s.at) > takenWithin {
			delete(g.started, id)
		}
	}
	g.dispatch()
}

// forget stops counting generation id as let start here: it was not
// queued after all, or a client here was sent its end frame.
func (g *tenantGate) forget(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.started[id]; ok {
		delete(g.started, id)
		g.dispatch()
	}
}

// enter waits until tenant may start generation id, or ctx ends. Once it
// returned nil, the generation counts as tenant's: call forget if it is
// not queued after all.
func (g *tenantGate) enter(ctx context.Context, tenant, id string) *wire.Error {
	g.mu.Lock()
	if len(g.lines[tenant]) == 0 && g.admits(tenant) {
		g.started[id] = startedGen{tenant: tenant, at: time.Now()}
		g.mu.Unlock()
		return nil
	}
	w := &gateWaiter{id: id, admitted: make(chan struct{})}
	g.lines[tenant] = append(g.lines[tenant], w)
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
		delete(g.started, id)
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

// parts is every tenant's part in a decision, and the fleet's capacity and
// total of generations. g.mu is held.
func (g *tenantGate) parts() (capacity, total int, tenants map[string]slots.Tenant) {
	capacity, total, running := g.load.Tally()
	tenants = make(map[string]slots.Tenant, len(running)+len(g.lines))
	part := func(name string) slots.Tenant {
		t, ok := tenants[name]
		if !ok && g.caps != nil {
			t.Cap = g.caps().ConcurrencyOf(name)
		}
		return t
	}
	for name, n := range running {
		t := part(name)
		t.Used += n
		tenants[name] = t
	}
	for _, s := range g.started {
		t := part(s.tenant)
		t.Used++
		tenants[s.tenant] = t
		total++
	}
	for name, line := range g.lines {
		t := part(name)
		t.Waiting = len(line)
		tenants[name] = t
	}
	return capacity, total, tenants
}

// admits reports whether tenant may start a generation now. g.mu is held.
func (g *tenantGate) admits(tenant string) bool {
	capacity, total, tenants := g.parts()
	if _, ok := tenants[tenant]; !ok {
		t := slots.Tenant{}
		if g.caps != nil {
			t.Cap = g.caps().ConcurrencyOf(tenant)
		}
		tenants[tenant] = t
	}
	return slots.Admit(capacity, total, tenants, tenant)
}

// dispatch lets in the waiting requests that may start now, the tenant
// furthest below its share first. g.mu is held.
func (g *tenantGate) dispatch() {
	for len(g.lines) > 0 {
		capacity, total, tenants := g.parts()
		admitted := false
		for _, name := range slots.Next(capacity-slots.Reserve, tenants) {
			if !slots.Admit(capacity, total, tenants, name) {
				continue
			}
			line := g.lines[name]
			w := line[0]
			if len(line) == 1 {
				delete(g.lines, name)
			} else {
				g.lines[name] = line[1:]
			}
			g.started[w.id] = startedGen{tenant: name, at: time.Now()}
			close(w.admitted)
			admitted = true
			break
		}
		if !admitted {
			return
		}
	}
}
