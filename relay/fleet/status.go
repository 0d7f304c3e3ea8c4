package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/fleet/canary"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// Status is the cluster-wide provider state, as GET /v1/relay/status
// serves it and `relay status` prints it.
type Status struct {
	At time.Time `json:"at"`
	// Coordinator is the active coordinator's lease (empty holder: none).
	Coordinator wire.Lease      `json:"coordinator"`
	Breakers    []BreakerStatus `json:"breakers"`
	Pauses      []PauseStatus   `json:"pauses"`
	Health      []wire.Health   `json:"health"`
	Quotas      QuotaStatus     `json:"quotas"`
	Canaries    []canary.State  `json:"canaries"`
	// Keys are the provider API keys as the workers checked them.
	Keys []KeyStatus `json:"keys"`
	// Log is the chunk streams, one per partition: where the answers are
	// stored, and which server leads each.
	Log []streams.PartitionInfo `json:"log"`
	// Errors name the parts that could not be read.
	Errors []string `json:"errors,omitempty"`
}

// Empty reports whether nothing at all was read.
func (s Status) Empty() bool {
	return len(s.Breakers) == 0 && len(s.Pauses) == 0 && len(s.Health) == 0 && len(s.Canaries) == 0 &&
		len(s.Quotas.Nodes) == 0 && s.Coordinator.Holder == ""
}

// BreakerStatus is one breaker.
type BreakerStatus struct {
	Scope    string `json:"scope"`
	Provider string `json:"provider"`
	Model    string `json:"model,omitempty"`
	breaker.State
}

// PauseStatus is one shared Retry-After pause.
type PauseStatus struct {
	Scope    string `json:"scope"`
	Provider string `json:"provider"`
	Model    string `json:"model,omitempty"`
	wire.Pause
}

// QuotaStatus sums the nodes' reports.
type QuotaStatus struct {
	Limits  []LimitStatus `json:"limits"`
	Retries []RetryStatus `json:"retries"`
	Nodes   []NodeStatus  `json:"nodes"`
	Tenants *quota.Limits `json:"tenant_limits,omitempty"`
	Calls   []CallsStatus `json:"calls"`
}

// LimitStatus is one shared limit: its value, what the fleet used and
// wanted in the last interval (per minute) and how many nodes share it.
type LimitStatus struct {
	Key       string  `json:"key"`
	PerMinute float64 `json:"per_minute"`
	Used      float64 `json:"used_per_minute"`
	Demand    float64 `json:"demand_per_minute"`
	Nodes     int     `json:"nodes"`
}

// RetryStatus is the retry budget of a scope (ScopeOf: a model on a
// provider, or a provider) over the fleet.
type RetryStatus struct {
	Scope string `json:"scope"`
	quota.Retries
}

// CallsStatus are the fleet's calls of a provider and model since the
// workers started.
type CallsStatus struct {
	Target string `json:"target"` // "<provider>/<model>"
	quota.Calls
}

// NodeStatus is one node's last report.
type NodeStatus struct {
	Node  string             `json:"node"`
	Role  string             `json:"role"`
	At    time.Time          `json:"at"`
	Share map[string]float64 `json:"share,omitempty"`
}

// ParseScope splits a breaker or pause key into provider and model.
func ParseScope(key string) (provider, model string) {
	p, m, _ := strings.Cut(key, ".")
	provider, _ = wire.ParseKeyToken(p)
	if m != "" {
		model, _ = wire.ParseKeyToken(m)
	}
	return provider, model
}

// ReadStatus reads every shared bucket once through js, which may be a
// region's view (reads are local).
func ReadStatus(ctx context.Context, js jetstream.JetStream) (Status, error) {
	st := Status{At: time.Now().UTC(), Breakers: []BreakerStatus{}, Pauses: []PauseStatus{}, Health: []wire.Health{}, Canaries: []canary.State{}, Keys: []KeyStatus{}}
	st.Quotas = QuotaStatus{Limits: []LimitStatus{}, Retries: []RetryStatus{}, Nodes: []NodeStatus{}, Calls: []CallsStatus{}}
	var errs []error
	read := func(bucket string, each func(key string, value []byte) error) {
		kv, err := js.KeyValue(ctx, bucket)
		if err == nil {
			err = snapshot(ctx, kv, each)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", bucket, err))
		}
	}
	read(wire.BreakerBucket, func(key string, v []byte) error {
		b := BreakerStatus{Scope: key}
		b.Provider, b.Model = ParseScope(key)
		if err := json.Unmarshal(v, &b.State); err != nil {
			return err
		}
		b.Phase = b.Current()
		st.Breakers = append(st.Breakers, b)
		return nil
	})
	read(wire.PauseBucket, func(key string, v []byte) error {
		p := PauseStatus{Scope: key}
		p.Provider, p.Model = ParseScope(key)
		if err := json.Unmarshal(v, &p.Pause); err != nil {
			return err
		}
		if p.Until.After(time.Now()) {
			st.Pauses = append(st.Pauses, p)
		}
		return nil
	})
	read(wire.HealthBucket, func(_ string, v []byte) error {
		var h wire.Health
		if err := json.Unmarshal(v, &h); err != nil {
			return err
		}
		st.Health = append(st.Health, h)
		return nil
	})
	read(wire.CanaryBucket, func(_ string, v []byte) error {
		var c canary.State
		if err := json.Unmarshal(v, &c); err != nil {
			return err
		}
		st.Canaries = append(st.Canaries, c)
		return nil
	})
	var reports []quota.Report
	shares := map[string]quota.Shares{}
	read(wire.QuotaBucket, func(key string, v []byte) error {
		switch {
		case strings.HasPrefix(key, DemandPrefix):
			var r quota.Report
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if r.Fresh(time.Now()) {
				reports = append(reports, r)
			}
		case strings.HasPrefix(key, SharePrefix):
			var s quota.Shares
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
			shares[strings.TrimPrefix(key, SharePrefix)] = s
		case key == LimitsKey:
			var l quota.Limits
			if err := json.Unmarshal(v, &l); err != nil {
				return err
			}
			st.Quotas.Tenants = &l
		}
		return nil
	})
	st.Quotas.fill(reports, shares)
	st.Keys = keysOf(reports)
	var err error
	if st.Log, err = streams.ReadPartitions(ctx, js); err != nil {
		errs = append(errs, fmt.Errorf("chunk streams: %w", err))
	}
	kv, err := js.KeyValue(ctx, wire.LeaseBucket)
	if err == nil {
		st.Coordinator, err = LeaseHolder(ctx, kv, wire.CoordinatorLeaseKey)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", wire.LeaseBucket, err))
	}
	slices.SortFunc(st.Breakers, func(a, b BreakerStatus) int { return strings.Compare(a.Scope, b.Scope) })
	slices.SortFunc(st.Pauses, func(a, b PauseStatus) int { return strings.Compare(a.Scope, b.Scope) })
	slices.SortFunc(st.Health, func(a, b wire.Health) int { return strings.Compare(a.Provider, b.Provider) })
	slices.SortFunc(st.Canaries, func(a, b canary.State) int { return strings.Compare(a.Model, b.Model) })
	return st, errors.Join(errs...)
}

// fill sums the fresh reports.
func (q *QuotaStatus) fill(reports []quota.Report, shares map[string]quota.Shares) {
	limits := map[string]*LimitStatus{}
	retries := map[string]*RetryStatus{}
	calls := map[string]*CallsStatus{}
	for _, r := range reports {
		n := NodeStatus{Node: r.Node, Role: r.Role, At: r.At}
		if s, ok := shares[wire.KeyToken(r.Node)]; ok {
			n.Share = s.PerMinute
		}
		q.Nodes = append(q.Nodes, n)
		for key, d := range r.Demand {
			l := limits[key]
			if l == nil {
				l = &LimitStatus{Key: key}
				limits[key] = l
			}
			l.Demand += d
			l.Used += r.Used[key]
			l.Nodes++
			l.PerMinute = max(l.PerMinute, r.Limits[key])
		}
		for p, c := range r.Retries {
			s := retries[p]
			if s == nil {
				s = &RetryStatus{Scope: p}
				retries[p] = s
			}
			s.Requests += c.Requests
			s.Retries.Retries += c.Retries
			s.Denied += c.Denied
		}
		for target, c := range r.Calls {
			s := calls[target]
			if s == nil {
				s = &CallsStatus{Target: target}
				calls[target] = s
			}
			s.Calls.Calls += c.Calls
			s.Failures += c.Failures
			s.Refused += c.Refused
			s.Open += c.Open
			if c.LastFailure.After(s.LastFailure) {
				s.LastFailure, s.LastError = c.LastFailure, c.LastError
			}
		}
	}
	for _, l := range limits {
		if l.PerMinute == 0 && q.Tenants != nil && quota.IsTenant(l.Key) {
			l.PerMinute = q.Tenants.TenantRPM
		}
		q.Limits = append(q.Limits, *l)
	}
	for _, r := range retries {
		q.Retries = append(q.Retries, *r)
	}
	for _, c := range calls {
		q.Calls = append(q.Calls, *c)
	}
	slices.SortFunc(q.Limits, func(a, b LimitStatus) int { return strings.Compare(a.Key, b.Key) })
	slices.SortFunc(q.Retries, func(a, b RetryStatus) int { return strings.Compare(a.Scope, b.Scope) })
	slices.SortFunc(q.Calls, func(a, b CallsStatus) int { return strings.Compare(a.Target, b.Target) })
	slices.SortFunc(q.Nodes, func(a, b NodeStatus) int { return strings.Compare(a.Role+a.Node, b.Role+b.Node) })
}

// snapshot calls each for every key of kv, as of now.
func snapshot(ctx context.Context, kv jetstream.KeyValue, each func(key string, value []byte) error) error {
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	var errs []error
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return errors.Join(errs...)
			}
			if err := each(e.Key(), e.Value()); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", e.Key(), err))
			}
		}
	}
}
