package spend

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
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
	// readied is closed once ready is set, for WaitReady.
	readied chan struct{}
	// track says which tenants' records are remembered by id, in
	// recorded (when this node saw them), for their holds (Reserve).
	track    func(tenant string) bool
	recorded map[string]time.Time
}

// NewTally returns an empty Tally, not Ready until Run read the ledger.
// The records of the tenants track accepts (nil: none) are remembered by
// id for an hour, so their holds stop counting once their records do.
func NewTally(track func(tenant string) bool) *Tally {
	return &Tally{days: map[string]map[string]map[string]Totals{}, track: track, recorded: map[string]time.Time{},
		readied: make(chan struct{})}
}

// WaitReady waits until t is Ready or ctx ends, and reports whether it is.
func (t *Tally) WaitReady(ctx context.Context) bool {
	t.mu.Lock()
	readied := t.readied
	t.mu.Unlock()
	select {
	case <-readied:
	case <-ctx.Done():
	}
	return t.Ready()
}

// noteRecorded remembers that the record of request id, of tenant and
// created at, was seen now, if its hold may still count.
func (t *Tally) noteRecorded(tenant, id string, created, now time.Time) {
	if t.track == nil || !t.track(tenant) || now.Sub(created) > HoldTTL {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recorded[id] = now
	if len(t.recorded)%1024 == 0 {
		for k, at := range t.recorded {
			if now.Sub(at) > HoldTTL+settledGrace {
				delete(t.recorded, k)
			}
		}
	}
}

// split sorts a scope's holds at now: keep are those still to be written
// back (not expired, their records not seen for settledGrace), and held
// sums those that count (not expired, their records not seen at all).
func (t *Tally) split(h holds, now time.Time) (keep holds, held Totals) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keep = holds{}
	for id, o := range h {
		if now.Unix() >= o.Expires {
			continue
		}
		seen, ok := t.recorded[id]
		if ok && now.Sub(seen) > settledGrace {
			continue
		}
		keep[id] = o
		if !ok {
			held = held.Add(o.Totals())
		}
	}
	return keep, held
}

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
	t.month, t.days = month, map[string]map[string]map[string]Totals{}
	if t.ready {
		t.ready, t.readied = false, make(chan struct{})
	}
}

func (t *Tally) markReady() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ready {
		t.ready = true
		close(t.readied)
	}
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
			key := e.Key()
			t.noteRecorded(r.Tenant, key[strings.LastIndexByte(key, '.')+1:], e.Created(), time.Now())
		}
	}
}
