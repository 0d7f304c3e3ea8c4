package spend

import (
	"fmt"
	"time"
)

// Limits are budgets over the UTC day and month. A zero field sets no
// budget; the zero Limits none at all.
type Limits struct {
	DailyTokens    int64   `koanf:"daily_tokens" json:"daily_tokens,omitempty"`
	MonthlyTokens  int64   `koanf:"monthly_tokens" json:"monthly_tokens,omitempty"`
	DailyCostUSD   float64 `koanf:"daily_cost_usd" json:"daily_cost_usd,omitempty"`
	MonthlyCostUSD float64 `koanf:"monthly_cost_usd" json:"monthly_cost_usd,omitempty"`
}

// IsZero reports whether l sets no budget.
func (l Limits) IsZero() bool { return l == Limits{} }

// Validate names the first negative budget under prefix.
func (l Limits) Validate(prefix string) error {
	switch {
	case l.DailyTokens < 0:
		return fmt.Errorf("%s.daily_tokens: must not be negative", prefix)
	case l.MonthlyTokens < 0:
		return fmt.Errorf("%s.monthly_tokens: must not be negative", prefix)
	case l.DailyCostUSD < 0:
		return fmt.Errorf("%s.daily_cost_usd: must not be negative", prefix)
	case l.MonthlyCostUSD < 0:
		return fmt.Errorf("%s.monthly_cost_usd: must not be negative", prefix)
	}
	return nil
}

// Totals is what was spent in one period.
type Totals struct {
	Tokens  int64   `json:"tokens"`
	CostUSD float64 `json:"cost_usd"`
}

// Add returns t with o added.
func (t Totals) Add(o Totals) Totals {
	return Totals{Tokens: t.Tokens + o.Tokens, CostUSD: t.CostUSD + o.CostUSD}
}

// Usage is what was spent in the current UTC day and month.
type Usage struct {
	Day, Month Totals
}

// Budget names one of the four budgets of a Limits.
type Budget string

// The budgets, in the order they are checked.
const (
	DailyTokens    Budget = "daily_tokens"
	DailyCost      Budget = "daily_cost_usd"
	MonthlyTokens  Budget = "monthly_tokens"
	MonthlyCost    Budget = "monthly_cost_usd"
	budgetsChecked        = 4
)

// Budgets lists every Budget, for metric labels.
var Budgets = [budgetsChecked]Budget{DailyTokens, DailyCost, MonthlyTokens, MonthlyCost}

// Daily reports whether b is counted over a day (else a month).
func (b Budget) Daily() bool { return b == DailyTokens || b == DailyCost }

// ResetAt is when b's period, the one holding now, ends.
func (b Budget) ResetAt(now time.Time) time.Time {
	if b.Daily() {
		return DayEnd(now)
	}
	return MonthEnd(now)
}

// Level is how far usage has gone into one budget.
type Level struct {
	Budget Budget
	// Limit and Used are tokens, or US dollars for a cost budget.
	Limit, Used float64
}

// Fraction is Used over Limit.
func (l Level) Fraction() float64 { return l.Used / l.Limit }

// Levels lists u against every budget l sets, in Budgets order.
func (l Limits) Levels(u Usage) []Level {
	var out []Level
	add := func(b Budget, limit, used float64) {
		if limit > 0 {
			out = append(out, Level{Budget: b, Limit: limit, Used: used})
		}
	}
	add(DailyTokens, float64(l.DailyTokens), float64(u.Day.Tokens))
	add(DailyCost, l.DailyCostUSD, u.Day.CostUSD)
	add(MonthlyTokens, float64(l.MonthlyTokens), float64(u.Month.Tokens))
	add(MonthlyCost, l.MonthlyCostUSD, u.Month.CostUSD)
	return out
}

// Exhausted returns the first budget of l that u has used up, if any:
// the one that refuses a new generation. A budget is used up once usage
// reaches it, since a generation's usage is known only at its end and
// the last one admitted may have gone past it.
func (l Limits) Exhausted(u Usage) (Level, bool) { return l.Reached(u, 1) }

// Reached returns the first budget of l that u has used at least fraction
// of: a warning threshold's.
func (l Limits) Reached(u Usage, fraction float64) (Level, bool) {
	for _, lv := range l.Levels(u) {
		if lv.Used >= fraction*lv.Limit {
			return lv, true
		}
	}
	return Level{}, false
}
