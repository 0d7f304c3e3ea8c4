package edge

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/relaydev/relay/relay/spend"
)

// GET /v1/relay/usage answers the calling tenant's own usage, never
// another's: tokens and cost in the current UTC day and month, its
// budgets and when they reset, and the same for each of its keys. It is
// read from the edge's copy of the usage ledger (admit_spend.go), so it lags the
// streams' ends by the watch's delay. The keys are named by spend.KeyID,
// the first 12 hex digits of the key's SHA-256.
//
//	{"object": "relay.usage", "tenant": "acme",
//	 "day":   {"period": "2026-12-02", "tokens": 1200, "cost_usd": 0.01, "resets_at": "2026-12-03T00:00:00Z"},
//	 "month": {"period": "2026-12", ...},
//	 "budgets": {"daily_tokens": 100000}, "soft_budgets": {...},
//	 "keys": [{"key": "3f9a1c7e5b2d", "day": {...}, "month": {...}, "budgets": {...}}]}

type usageObject struct {
	Object      string        `json:"object"`
	Tenant      string        `json:"tenant"`
	Day         periodUsage   `json:"day"`
	Month       periodUsage   `json:"month"`
	Budgets     *spend.Limits `json:"budgets,omitempty"`
	SoftBudgets *spend.Limits `json:"soft_budgets,omitempty"`
	Keys        []keyUsage    `json:"keys"`
}

type keyUsage struct {
	Key     string        `json:"key"`
	Day     periodUsage   `json:"day"`
	Month   periodUsage   `json:"month"`
	Budgets *spend.Limits `json:"budgets,omitempty"`
}

type periodUsage struct {
	Period string `json:"period"`
	spend.Totals
	ResetsAt time.Time `json:"resets_at"`
}

// usageWait is how long a request waits for the ledger to be read, on an
// edge that had not followed it yet.
const usageWait = 3 * time.Second

// errLedgerUnread: the ledger could not be read in time.
var errLedgerUnread = errors.New("the usage ledger is not read yet")

func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	tally, err := s.readyLedger(r.Context())
	if err != nil {
		writeError(w, unavailable("reading usage", err))
		return
	}
	tenant, now := principalOf(r).tenant, time.Now()
	out := usageObject{Object: "relay.usage", Tenant: tenant, Keys: []keyUsage{}}
	out.Day, out.Month = periods(tally.Tenant(tenant, now), now)
	if ts, ok := s.spend.tenants[tenant]; ok {
		out.Budgets, out.SoftBudgets = limitsOrNil(ts.Limits), limitsOrNil(ts.Soft)
	}
	keys := append(slices.Clone(s.spend.keysOf[tenant]), tally.Keys(tenant)...)
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		ku := keyUsage{Key: k, Budgets: limitsOrNil(s.spend.keys[k])}
		ku.Day, ku.Month = periods(tally.Key(tenant, k, now), now)
		out.Keys = append(out.Keys, ku)
	}
	writeJSON(w, http.StatusOK, out)
}

// readyLedger returns the ledger's tally once it is read, waiting up to
// usageWait.
func (s *Server) readyLedger(ctx context.Context) (*spend.Tally, error) {
	ctx, cancel := context.WithTimeout(ctx, usageWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if t := s.ledger(); t != nil && t.Ready() {
			return t, nil
		}
		select {
		case <-ctx.Done():
			return nil, errLedgerUnread
		case <-tick.C:
		}
	}
}

func periods(u spend.Usage, now time.Time) (day, month periodUsage) {
	return periodUsage{Period: spend.DayOf(now), Totals: u.Day, ResetsAt: spend.DayEnd(now)},
		periodUsage{Period: spend.MonthOf(now), Totals: u.Month, ResetsAt: spend.MonthEnd(now)}
}

func limitsOrNil(l spend.Limits) *spend.Limits {
	if l.IsZero() {
		return nil
	}
	return &l
}
