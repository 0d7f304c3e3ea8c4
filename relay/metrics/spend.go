package metrics

import "github.com/prometheus/client_golang/prometheus"

// spendFamilies count what an edge did about tenants' spend budgets
// (edge/admit_spend.go). Labels: budget is one of spend.Budgets, scope "tenant"
// or "key"; no tenant or key names, which only operators configure but
// which would still grow with every key.
type spendFamilies struct {
	warnings   *prometheus.CounterVec
	refusals   *prometheus.CounterVec
	downgrades prometheus.Counter
}

// spendBudgets (spend.Budgets) and spendScopes are the label values of
// the spend families, each series exported from the start at zero, so
// that a dashboard finds the families before the first budget is reached.
var (
	spendBudgets = []string{"daily_tokens", "daily_cost_usd", "monthly_tokens", "monthly_cost_usd"}
	spendScopes  = []string{"tenant", "key"}
)

func newSpendFamilies(r *registrar) spendFamilies {
	f := spendFamilies{
		warnings: counterVec(r, "relay_edge_spend_warnings_total",
			"Budgets whose usage crossed edge.spend.warn_at, counted once per budget, tenant or key and period by each edge that saw it.",
			"budget", "scope"),
		refusals: counterVec(r, "relay_edge_spend_refusals_total",
			"Generations refused with 429 insufficient_quota because a budget was used up.",
			"budget", "scope"),
		downgrades: counter(r, "relay_edge_spend_downgrades_total",
			"Generations sent to a cheaper model because their tenant crossed its soft limit (edge.spend.tenants[].downgrade)."),
	}
	for _, b := range spendBudgets {
		for _, sc := range spendScopes {
			f.warnings.WithLabelValues(b, sc)
			f.refusals.WithLabelValues(b, sc)
		}
	}
	return f
}

// SpendWarning counts a budget of scope crossing the warning threshold.
func (m *Edge) SpendWarning(budget, scope string) {
	m.spend.warnings.WithLabelValues(budget, scope).Inc()
}

// SpendRefusal counts a generation refused by a used-up budget of scope.
func (m *Edge) SpendRefusal(budget, scope string) {
	m.spend.refusals.WithLabelValues(budget, scope).Inc()
}

// SpendDowngrade counts a generation sent to its tenant's cheaper model.
func (m *Edge) SpendDowngrade() { m.spend.downgrades.Inc() }
