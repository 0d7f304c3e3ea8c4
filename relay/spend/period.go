package spend

import "time"

// Budgets are counted over UTC days and months, the same for every node
// whatever its time zone.

// DayOf names the UTC day of t ("2026-12-02"): the day a Record counts in.
func DayOf(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// MonthOf names the UTC month of t ("2026-12").
func MonthOf(t time.Time) string { return t.UTC().Format("2006-01") }

// DayEnd is when the UTC day of t ends, and its daily budgets reset.
func DayEnd(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
}

// MonthEnd is when the UTC month of t ends, and its monthly budgets reset.
func MonthEnd(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}
