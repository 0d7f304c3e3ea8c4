package edge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/spend"
	"github.com/relaydev/relay/relay/wire"
)

// The edge's part of the cluster-wide provider state: the per-tenant
// requests- and tokens-per-minute limits (shared by every edge,
// fleet.TenantLimiter), the tenants' fair share of the workers' slots
// (admit_tenant_gate.go)
// and, for a request that asked to fail fast, a 503 at once for a model
// whose every provider's breaker is open (the others are queued, and wait
// at the worker for the breakers' probes). Both
// act on local copies (a share, a watch of the breakers), so a
// request makes no round trip for them. They start on the first request
// and stop when the edge's NATS connection closes; until the buckets are
// read, every request passes.

// CodeRateLimited is the code of a tenant's 429.
const CodeRateLimited = "rate_limit_exceeded"

// admitGeneration is asked before a new generation is queued: the tenant's
// limit, then, if the request fails fast, the model's breakers. It returns
// the error the client gets: a 429 or a 503, both with Retry-After.
func (s *Server) admitGeneration(ctx context.Context, tenant string, req chatRequest) *wire.Error {
	cs := s.clusterState()
	if cs == nil {
		return nil
	}
	if ok, wait := cs.limiter.Allow(ctx, tenant); !ok {
		return &wire.Error{
			Message:      fmt.Sprintf("Rate limit reached for requests of this API key; retry in %v.", wait.Round(time.Second)),
			Type:         "requests",
			Code:         CodeRateLimited,
			Status:       http.StatusTooManyRequests,
			RetryAfterMS: wait.Milliseconds(),
		}
	}
	if e := s.admitSpend(ctx, tenant); e != nil { // admit_spend.go
		return e
	}
	if !req.FailFast {
		return nil
	}
	if m, ok := s.catalog.ModelSettings(req.Model); ok && m.Cache.For(tenant) {
		// A kept answer may serve it: the worker, asked to fail fast,
		// answers from it or refuses at once.
		return nil
	}
	if wait, open := cs.view.AllOpen(s.catalog.Route(req.Model), time.Now()); open {
		return &wire.Error{
			Message:      "No provider can take the request now: every provider of " + req.Model + " is unavailable (circuit breaker open).",
			Type:         wire.TypeUpstream,
			Code:         wire.CodeBreakerOpen,
			Status:       http.StatusServiceUnavailable,
			RetryAfterMS: wait.Milliseconds(),
		}
	}
	return nil
}

// setRetryAfter sets Retry-After (whole seconds, rounded up) for an error
// that says when to try again, and for every 503: a 503 asks the client to
// come back, and clients and SDKs that retry it read when from the header,
// so one without a hint of its own (and none set yet, as a draining edge
// sets its own) gets unavailableRetry.
func setRetryAfter(w http.ResponseWriter, e *wire.Error) {
	switch {
	case e == nil:
	case e.RetryAfterMS > 0:
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(time.Duration(e.RetryAfterMS)*time.Millisecond), 10))
	case statusOf(e, http.StatusInternalServerError) == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "":
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(unavailableRetry), 10))
	}
}

// unavailableRetry is the Retry-After of a 503 that has no hint of its
// own: NATS calls that failed, /readyz, a provider's 503 passed on.
const unavailableRetry = time.Second

// admitStart is asked once generation id of tenant passed
// admitGeneration, just before it is queued: its tenant's tokens per
// minute, then its turn among the tenants (admit_tenant_gate.go), which it may
// wait for. Its budgets' hold is taken first, so it counts while it waits. Once it returned nil, call undo if the generation is not
// queued after all.
func (s *Server) admitStart(ctx context.Context, tenant, id string, req chatRequest) (undo func(), e *wire.Error) {
	release, e := s.reserveSpend(ctx, tenant, id, func() spend.Hold { return s.generationCost(tenant, req) }) // admit_spend_hold.go
	if e != nil {
		return nil, e
	}
	cs := s.clusterState()
	if cs == nil {
		return release, nil
	}
	if e := cs.tokens.reserve(tenant, id); e != nil {
		release()
		return nil, e
	}
	if e := cs.gate.enter(ctx, tenant, id); e != nil {
		cs.tokens.settle(id, nil)
		release()
		return nil, e
	}
	return func() {
		cs.gate.forget(id)
		cs.tokens.settle(id, nil)
		release()
	}, nil
}

// generationEnded is told when a client here is sent the end frame of
// stream id: the generation no longer holds a slot (admit_tenant_gate.go), and
// its usage pays its tokens (admit_tenant_tokens.go).
func (s *Server) generationEnded(id string, end *wire.Frame) {
	s.settleSpend(id, end.Usage) // admit_spend_hold.go
	s.cluster.mu.Lock()
	cs := s.cluster.st
	s.cluster.mu.Unlock()
	if cs == nil {
		return
	}
	cs.gate.forget(id)
	cs.tokens.settle(id, end.Usage)
}

// edgeCluster is one edge's cluster state.
type edgeCluster struct {
	limiter *fleet.TenantLimiter
	tokens  *tokenDebts
	gate    *tenantGate
	view    *fleet.View // the breakers
}

// lazyCluster starts an edge's cluster state once its buckets can be read.
type lazyCluster struct {
	mu      sync.Mutex
	st      *edgeCluster
	retryAt time.Time
	// stop ends the state's goroutines and waits for them.
	stop func()
}

// clusterRetry spaces the attempts to open the buckets.
const clusterRetry = 5 * time.Second

func (s *Server) clusterState() *edgeCluster {
	l := &s.cluster
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st != nil || time.Now().Before(l.retryAt) {
		return l.st
	}
	st, stop, err := s.startCluster()
	if err != nil {
		l.retryAt = time.Now().Add(clusterRetry)
		s.log.Warn("cluster state unavailable; requests pass unchecked", "err", err, "retry_in", clusterRetry)
		return nil
	}
	l.st, l.stop = st, stop
	return st
}

// stopCluster stops the cluster state of s, if it started, and waits for
// its goroutines: Serve does as it returns.
func (s *Server) stopCluster() {
	l := &s.cluster
	l.mu.Lock()
	stop := l.stop
	l.st, l.stop = nil, nil
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (s *Server) startCluster() (*edgeCluster, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), natsTimeout)
	defer cancel()
	view, err := fleet.OpenView(ctx, s.js, s.log, wire.BreakerBucket, wire.QuotaBucket)
	if err != nil {
		return nil, nil, fmt.Errorf("edge: %w", err)
	}
	id := s.node
	if id == "" {
		var b [4]byte
		rand.Read(b[:])
		id = "edge-" + hex.EncodeToString(b[:])
	}
	node := &fleet.QuotaNode{KV: view.Quotas, ID: id, Logger: s.log}
	limiter := fleet.NewTenantLimiter(node)
	st := &edgeCluster{limiter: limiter, tokens: newTokenDebts(limiter), gate: newTenantGate(node.TenantLimits, s.cfg.TurnWait), view: view}
	run, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		// Serve stops the state as it returns (stopCluster); an edge used
		// only through its Handler has no stop of its own: its connection
		// closing is it.
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-run.Done():
				return
			case now := <-t.C:
				st.tokens.expire(now)
			}
			if s.nc.IsClosed() {
				stop()
				return
			}
		}
	})
	wg.Go(func() { view.Run(run) })
	wg.Go(func() { node.Run(run) })
	wg.Go(func() {
		if err := st.gate.follow(run, s.nc, node.ID); err != nil {
			s.log.Warn("tenants' slots not shared", "err", err)
		}
	})
	return st, func() { stop(); wg.Wait() }, nil
}
