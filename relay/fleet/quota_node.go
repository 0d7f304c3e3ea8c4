package fleet

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/wire"
)

// Quota bucket keys (wire.QuotaBucket).
const (
	// DemandPrefix is followed by "<role>.<node>": a node's quota.Report.
	DemandPrefix = "demand."
	// SharePrefix is followed by "<node>": a node's quota.Shares.
	SharePrefix = "share."
	// LimitsKey holds the tenant limits (quota.Limits).
	LimitsKey = "limits"
)

// DemandKey and ShareKey are a node's keys in the quota bucket.
func DemandKey(role, node string) string { return DemandPrefix + role + "." + wire.KeyToken(node) }
func ShareKey(node string) string        { return SharePrefix + wire.KeyToken(node) }

// DefaultQuotaInterval is how often a node reports and picks up its share.
const DefaultQuotaInterval = time.Second

// QuotaNode is one node's side of the shared limits: it enforces its share
// of each limit locally (Take, Positive, Debit), and every Interval reports
// its demand to its own key and reads the share the coordinator wrote it.
// Without a share (no coordinator yet, or a new node while none runs) it
// takes an even split of each limit over the nodes of its role that
// reported lately. It is safe for concurrent use.
type QuotaNode struct {
	// KV is the quota bucket. Required.
	KV jetstream.KeyValue
	// ID names the node; Role is "worker" or "edge".
	ID, Role string
	// Interval between reports (zero: DefaultQuotaInterval).
	Interval time.Duration
	Logger   *slog.Logger
	// Extra, if set, adds to each report (a worker's call counts).
	Extra func(*quota.Report)

	mu      sync.Mutex
	limits  map[string]*nodeLimit
	tenants quota.Limits
	shares  quota.Shares
	haveSh  bool
	nodes   int // nodes of the role, counted when there is no share
	rolled  time.Time
	// peers counts the nodes while there is no share (quota_peers.go).
	peers *peerWatch
}

type nodeLimit struct {
	limit  float64 // the cluster-wide limit per minute
	cfg    quota.Limit
	bucket *quota.Bucket
	demand quota.Meter
	used   quota.Meter
	// tokens: a limit paid after the call (tokens per minute), whose
	// calls are estimated at their mean cost.
	tokens       bool
	calls, spent float64
}

func (q *QuotaNode) init() {
	if q.limits == nil {
		q.limits = map[string]*nodeLimit{}
	}
	if q.nodes == 0 {
		q.nodes = 1
	}
	if q.Logger == nil {
		q.Logger = slog.New(slog.DiscardHandler)
	}
}

// Declare adds a limit the node enforces: perMinute over the cluster, with
// cfg's burst. tokens marks a limit paid after the call (Reserve, Settle)
// rather than taken before it (Take).
func (q *QuotaNode) Declare(key string, perMinute float64, cfg quota.Limit, tokens bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.init()
	q.declare(key, perMinute, cfg, tokens)
}

func (q *QuotaNode) declare(key string, perMinute float64, cfg quota.Limit, tokens bool) *nodeLimit {
	l := q.limits[key]
	if l == nil {
		l = &nodeLimit{tokens: tokens}
		q.limits[key] = l
	}
	l.limit, l.cfg = perMinute, cfg
	share := q.shareOf(key, l)
	if l.bucket == nil {
		l.bucket = quota.NewBucket(time.Now(), share, cfg.BurstOf(share))
	} else {
		l.bucket.SetRate(time.Now(), share, cfg.BurstOf(share))
	}
	return l
}

// shareOf is the node's share of a limit: the coordinator's, else the
// tenant default it gave, else an even split.
func (q *QuotaNode) shareOf(key string, l *nodeLimit) float64 {
	if q.haveSh {
		if s, ok := q.shares.PerMinute[key]; ok {
			return min(s, l.limit)
		}
		switch {
		case !quota.IsTenant(key):
		case quota.IsTokens(key) && q.tenants.Edges > 0:
			return l.limit / float64(q.tenants.Edges)
		case !quota.IsTokens(key) && q.shares.TenantDefault > 0:
			return min(q.shares.TenantDefault, l.limit)
		}
	}
	return l.limit / float64(max(q.nodes, 1))
}

// Take takes n from the limit at key if the node's share allows it now;
// otherwise it returns how long until it would. A key without a limit
// always allows.
func (q *QuotaNode) Take(key string, n float64) (bool, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.limits[key]
	if l == nil || l.limit <= 0 {
		return true, 0
	}
	l.demand.Add(n)
	ok, wait := l.bucket.Take(time.Now(), n)
	if ok {
		l.used.Add(n)
	}
	return ok, wait
}

// Reserve admits a call against a debited limit (tokens per minute) while
// the node's share has something left, and takes the call's estimated
// cost at once, so that calls admitted together do not all spend the same
// balance; Settle pays the difference once the cost is known. The
// estimate is the mean cost of the node's calls so far, and one second of
// the share before any call ended.
//
// first says that this is the call's first try, counted in the demand;
// the tries of a call that waited for its turn are not.
func (q *QuotaNode) Reserve(key string, first bool) (ok bool, wait time.Duration, reserved float64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.limits[key]
	if l == nil || l.limit <= 0 {
		return true, 0, 0
	}
	est := l.bucket.PerMinute() / 60
	if l.calls > 0 {
		est = l.spent / l.calls
	}
	ok, wait = l.bucket.Positive(time.Now())
	if !ok {
		if first {
			l.demand.Add(est)
		}
		return false, wait, 0
	}
	l.bucket.Debit(time.Now(), est)
	return true, 0, est
}

// Settle pays a reserved call's actual cost: the difference from what
// Reserve took, which may be a refund. A call never made settles at 0.
func (q *QuotaNode) Settle(key string, reserved, actual float64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.limits[key]
	if l == nil || l.limit <= 0 {
		return
	}
	l.bucket.Debit(time.Now(), actual-reserved)
	if actual > 0 {
		l.demand.Add(actual)
		l.used.Add(actual)
		l.calls++
		l.spent += actual
	}
}

// EnsureTenant declares the limit of tenant at key (its requests or its
// tokens per minute) from the tenant limits record, if it has one; it
// reports whether the tenant is limited.
func (q *QuotaNode) EnsureTenant(key, tenant string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.init()
	limit := q.tenants.OfKey(key, tenant)
	l := q.limits[key]
	switch {
	case limit <= 0 && l == nil:
		return false
	case l == nil || l.limit != limit:
		q.declare(key, limit, quota.Limit{}, quota.IsTokens(key))
	}
	return limit > 0
}

// TenantLimits is the tenant limits record last read.
func (q *QuotaNode) TenantLimits() quota.Limits {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.tenants
}

// Share is the node's current share of key per minute, and whether the
// coordinator set it.
func (q *QuotaNode) Share(key string) (float64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.limits[key]
	if l == nil {
		return 0, false
	}
	_, set := q.shares.PerMinute[key]
	return l.bucket.PerMinute(), q.haveSh && set
}

// Run reports and refreshes the shares every Interval until ctx ends.
func (q *QuotaNode) Run(ctx context.Context) error {
	q.mu.Lock()
	q.init()
	q.mu.Unlock()
	every := q.Interval
	if every <= 0 {
		every = DefaultQuotaInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	defer q.followPeers(ctx, false)
	for {
		q.followPeers(ctx, !q.hasShare())
		rctx, cancel := context.WithTimeout(ctx, every)
		q.Round(rctx)
		cancel()
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// hasShare reports whether the coordinator has given the node a share.
func (q *QuotaNode) hasShare() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.haveSh
}

// Round is one report and refresh; Run calls it every Interval. Without
// a share, it counts the nodes of the role only while Run follows them.
func (q *QuotaNode) Round(ctx context.Context) {
	r := q.report()
	if q.Extra != nil {
		q.Extra(&r)
	}
	data, _ := json.Marshal(r)
	if _, err := q.KV.Put(ctx, DemandKey(q.Role, q.ID), data); err != nil && ctx.Err() == nil {
		q.Logger.Debug("quota report not written", "err", err)
	}
	var sh quota.Shares
	haveSh := false
	if e, err := q.KV.Get(ctx, ShareKey(q.ID)); err == nil {
		haveSh = json.Unmarshal(e.Value(), &sh) == nil
	}
	var lim quota.Limits
	haveLim := false
	if e, err := q.KV.Get(ctx, LimitsKey); err == nil {
		haveLim = json.Unmarshal(e.Value(), &lim) == nil
	}
	nodes := 0
	if !haveSh {
		nodes = q.countNodes(ctx)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if haveSh {
		q.shares, q.haveSh = sh, true
	}
	if haveLim {
		q.tenants = lim
	}
	if nodes > 0 {
		q.nodes = nodes
	}
	now := time.Now()
	for key, l := range q.limits {
		if quota.IsTenant(key) && haveLim {
			name, err := TenantName(key)
			if err != nil {
				name = quota.TenantToken(key)
			}
			l.limit = q.tenants.OfKey(key, name)
		}
		share := q.shareOf(key, l)
		l.bucket.SetRate(now, share, l.cfg.BurstOf(share))
	}
}

// TenantName is the tenant of a tenant limit key (quota.TenantRPM,
// quota.TenantTPM).
func TenantName(key string) (string, error) {
	return wire.ParseKeyToken(quota.TenantToken(key))
}

// report rolls the meters into a report.
func (q *QuotaNode) report() quota.Report {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	secs := 0.0
	if !q.rolled.IsZero() {
		secs = now.Sub(q.rolled).Seconds()
	}
	q.rolled = now
	iv := q.Interval
	if iv <= 0 {
		iv = DefaultQuotaInterval
	}
	r := quota.Report{Node: q.ID, Role: q.Role, At: now.UTC(), Interval: iv.Milliseconds(),
		Demand: map[string]float64{}, Used: map[string]float64{}, Limits: map[string]float64{}}
	for key, l := range q.limits {
		if l.limit <= 0 {
			continue
		}
		r.Demand[key] = l.demand.Roll(secs)
		r.Used[key] = l.used.Roll(secs)
		if !quota.IsTenant(key) {
			r.Limits[key] = l.limit
		}
	}
	return r
}

// Retake is Take for a call that already asked (and was counted in the
// demand) and waited for its turn.
func (q *QuotaNode) Retake(key string, n float64) (bool, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.limits[key]
	if l == nil || l.limit <= 0 {
		return true, 0
	}
	ok, wait := l.bucket.Take(time.Now(), n)
	if ok {
		l.used.Add(n)
	}
	return ok, wait
}
