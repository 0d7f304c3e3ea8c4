package spend

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Tally is one node's copy of the current month's usage, summed from a
// watch of the ledger by tenant, key and day. Its methods may be called
// concurrently with Run.
type Tally struct {
	mu    sync.Mutex
	month string
	// days sums the month's records by tenant, key and day.
	days  map[string]map[string]map[string]Totals
	ready bool
}

// NewTally returns an empty Tally, not Ready until Run read the ledger.
func NewTally() *Tally { return &Tally{days: map[string]map[string]map[string]Totals{}} }

// Ready reports whether the current month's records were all read: until
// then the sums are short, and admission must not refuse on them.
func (t *Tally) Ready() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready && t.month == MonthOf(time.Now())
}

// Add counts r, a record of month.
func (t *Tally) Add(month string, r Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if month != t.month {
		return
	}
	keys := t.days[r.Tenant]
	if keys == nil {
		keys = map[string]map[string]Totals{}
		t.days[r.Tenant] = keys
	}
	if keys[r.Key] == nil {
		keys[r.Key] = map[string]Totals{}
	}
	keys[r.Key][r.Day] = keys[r.Key][r.Day].Add(r.Totals())
}

// Key is the usage of one key of tenant at now.
func (t *Tally) Key(tenant, key string, now time.Time) Usage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.usage(now, tenant, func(k string) bool { return k == key })
}

// Tenant is the usage of every key of tenant at now.
func (t *Tally) Tenant(tenant string, now time.Time) Usage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.usage(now, tenant, func(string) bool { return true })
}

// Keys lists the keys of tenant with usage this month.
func (t *Tally) Keys(tenant string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var keys []string
	for k := range t.days[tenant] {
		keys = append(keys, k)
	}
	return keys
}

// usage sums the days of tenant's keys that match.
func (t *Tally) usage(now time.Time, tenant string, match func(key string) bool) Usage {
	var u Usage
	if t.month != MonthOf(now) {
		return u
	}
	day := DayOf(now)
	for k, days := range t.days[tenant] {
		if !match(k) {
			continue
		}
		for d, tot := range days {
			u.Month = u.Month.Add(tot)
			if d == day {
				u.Day = u.Day.Add(tot)
			}
		}
	}
	return u
}

// reset starts the count of month, with nothing read yet.
func (t *Tally) reset(month string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.month, t.days, t.ready = month, map[string]map[string]map[string]Totals{}, false
}

func (t *Tally) markReady() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ready = true
}

// watchRetry spaces the attempts to watch the ledger after a failure.
const watchRetry = 2 * time.Second

// Run keeps t up to date from kv until ctx ends: a watch of the current
// month's records, started again at each new month and after a failure.
func (t *Tally) Run(ctx context.Context, kv jetstream.KeyValue, log *slog.Logger) {
	for ctx.Err() == nil {
		now := time.Now()
		month := MonthOf(now)
		t.reset(month)
		monthCtx, cancel := context.WithDeadline(ctx, MonthEnd(now))
		err := t.follow(monthCtx, kv, month)
		cancel()
		if err != nil && ctx.Err() == nil {
			log.Warn("usage ledger watch failed; watching again", "err", err, "retry_in", watchRetry)
			select {
			case <-ctx.Done():
			case <-time.After(watchRetry):
			}
		}
	}
}

// follow counts month's records until ctx ends (nil) or the watch fails.
func (t *Tally) follow(ctx context.Context, kv jetstream.KeyValue, month string) error {
	w, err := kv.Watch(ctx, monthSubject(month), jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errWatchClosed
			}
			if e == nil {
				t.markReady()
				continue
			}
			var r Record
			if err := json.Unmarshal(e.Value(), &r); err != nil {
				continue // not a record: written by something else
			}
			t.Add(month, r)
		}
	}
}
