package spend

import (
	"testing"
	"time"
)

// Periods are UTC days and months, whatever the zone of the time given,
// and each budget resets when its own period ends.
func TestPeriodsAreUTC(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	at := time.Date(2026, 12, 1, 8, 30, 0, 0, tokyo) // 2026-11-30 23:30 UTC
	if got := DayOf(at); got != "2026-11-30" {
		t.Errorf("DayOf = %s, want 2026-11-30", got)
	}
	if got := MonthOf(at); got != "2026-11" {
		t.Errorf("MonthOf = %s, want 2026-11", got)
	}
	if got, want := DayEnd(at), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("DayEnd = %v, want %v", got, want)
	}
	if got, want := MonthEnd(at), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("MonthEnd = %v, want %v", got, want)
	}
	dec31 := time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC)
	if got, want := MonthEnd(dec31), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("MonthEnd of December = %v, want %v", got, want)
	}
	if got, want := DailyTokens.ResetAt(dec31), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("daily reset = %v, want %v", got, want)
	}
	mid := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	if got, want := MonthlyCost.ResetAt(mid), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("monthly reset = %v, want %v", got, want)
	}
}

// A budget is exhausted once usage reaches it; the first exhausted one, in
// day-then-month order, is named; a zero field sets no budget.
func TestLimitsExhausted(t *testing.T) {
	l := Limits{DailyTokens: 100, MonthlyCostUSD: 5}
	for _, c := range []struct {
		name string
		u    Usage
		want Budget // "": none
	}{
		{"nothing used", Usage{}, ""},
		{"under both", Usage{Day: Totals{Tokens: 99}, Month: Totals{Tokens: 5000, CostUSD: 4.99}}, ""},
		{"daily tokens reached", Usage{Day: Totals{Tokens: 100}, Month: Totals{Tokens: 100}}, DailyTokens},
		{"monthly cost past", Usage{Day: Totals{Tokens: 1}, Month: Totals{CostUSD: 5.2}}, MonthlyCost},
		{"both: the daily first", Usage{Day: Totals{Tokens: 150}, Month: Totals{CostUSD: 9}}, DailyTokens},
	} {
		lv, ok := l.Exhausted(c.u)
		if got := map[bool]Budget{true: lv.Budget}[ok]; got != c.want {
			t.Errorf("%s: exhausted %q, want %q", c.name, got, c.want)
		}
	}
	if _, ok := (Limits{}).Exhausted(Usage{Day: Totals{Tokens: 1 << 40, CostUSD: 1e9}}); ok {
		t.Error("no budget refused usage")
	}
}

// A warning threshold is a fraction of each budget.
func TestLimitsReached(t *testing.T) {
	l := Limits{MonthlyTokens: 1000}
	if _, ok := l.Reached(Usage{Month: Totals{Tokens: 799}}, 0.8); ok {
		t.Error("79.9% reached an 80% threshold")
	}
	lv, ok := l.Reached(Usage{Month: Totals{Tokens: 800}}, 0.8)
	if !ok || lv.Budget != MonthlyTokens || lv.Fraction() != 0.8 {
		t.Errorf("80%%: %+v %v, want monthly_tokens at 0.8", lv, ok)
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := (Limits{DailyTokens: 1, MonthlyCostUSD: 2}).Validate("x"); err != nil {
		t.Error(err)
	}
	err := Limits{DailyCostUSD: -1}.Validate("edge.spend.tenants[0]")
	if err == nil || err.Error() != "edge.spend.tenants[0].daily_cost_usd: must not be negative" {
		t.Errorf("err = %v", err)
	}
}
