package spend

import (
	"testing"
	"time"
)

// A tally sums a key's records by day: the day's usage is today's
// records, the month's all of the month's; a tenant's is every key's; a
// record of another month, or a query in another month, counts nothing.
func TestTallySumsByKeyAndDay(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	yesterday := now.Add(-24 * time.Hour)
	tally := NewTally(nil)
	tally.reset(MonthOf(now))
	tally.Add(MonthOf(now), Record{Tenant: "acme", Key: "k1", Day: DayOf(yesterday), Tokens: 100, CostUSD: 1})
	tally.Add(MonthOf(now), Record{Tenant: "acme", Key: "k1", Day: DayOf(now), Tokens: 10, CostUSD: 0.5})
	tally.Add(MonthOf(now), Record{Tenant: "acme", Key: "k2", Day: DayOf(now), Tokens: 1, CostUSD: 0.25})
	tally.Add(MonthOf(now), Record{Tenant: "beta", Key: "k3", Day: DayOf(now), Tokens: 1000})
	tally.Add("2026-11", Record{Tenant: "acme", Key: "k1", Day: "2026-11-30", Tokens: 5000})

	if got, want := tally.Key("acme", "k1", now), (Usage{Day: Totals{10, 0.5}, Month: Totals{110, 1.5}}); got != want {
		t.Errorf("acme/k1: %+v, want %+v", got, want)
	}
	if got, want := tally.Tenant("acme", now), (Usage{Day: Totals{11, 0.75}, Month: Totals{111, 1.75}}); got != want {
		t.Errorf("acme: %+v, want %+v", got, want)
	}
	if got := tally.Tenant("acme", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)); got != (Usage{}) {
		t.Errorf("acme next month: %+v, want nothing until the tally follows January", got)
	}
	if len(tally.Keys("acme")) != 2 || len(tally.Keys("beta")) != 1 || len(tally.Keys("gamma")) != 0 {
		t.Errorf("keys: acme %v, beta %v", tally.Keys("acme"), tally.Keys("beta"))
	}
	if tally.Ready() {
		t.Error("ready before the ledger was read")
	}
}
