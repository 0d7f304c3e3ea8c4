package e2e

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// PromQL is read here only as far as it names series: strings, label
// matchers, ranges and grouping clauses are removed, then every
// identifier left that is not a function, an aggregation (both are
// followed by "(") or a keyword is a metric name. Grafana's variables
// ($provider, $__rate_interval) are not names.
var (
	promStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][\w:]*`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
		"group_left", "group_right", "inf", "nan", "Inf", "NaN", "atan2"}
	// grafanaLabelValues is a template variable's query label_values(metric, label).
	grafanaLabelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][\w:]*)`)
)

// promqlNames are the metric names expr selects, in order of appearance.
func promqlNames(expr string) []string {
	for _, re := range []*regexp.Regexp{promStrings, promMatchers, promRanges, promGrouping} {
		expr = re.ReplaceAllString(expr, " ")
	}
	var names []string
	for _, m := range promIdent.FindAllStringIndex(expr, -1) {
		name := expr[m[0]:m[1]]
		if m[0] > 0 && strings.ContainsAny(expr[m[0]-1:m[0]], "0123456789.$") {
			continue // part of a number (1e-9) or a variable
		}
		if strings.HasPrefix(strings.TrimSpace(expr[m[1]:]), "(") || slices.Contains(promKeywords, name) {
			continue // a function, an aggregation, a keyword
		}
		names = append(names, name)
	}
	return names
}

// The extraction the dashboard test relies on: it finds the names and
// only the names.
func TestPromQLNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (le, provider) (rate(relay_upstream_ttft_seconds_bucket{provider=~"$provider"}[$__rate_interval]))`: {"relay_upstream_ttft_seconds_bucket"},
		`sum(rate(a_total{s=~"failed|x"}[5m])) / clamp_min(sum(rate(a_total[5m])), 1e-9) > 0.05`:                    {"a_total", "a_total"},
		`max by (provider) (relay_breaker_next_probe_timestamp_seconds) - time() > 0`:                               {"relay_breaker_next_probe_timestamp_seconds"},
		`up{job=~"relay.*"} == 0 and on (instance) go_goroutines offset 5m`:                                         {"up", "go_goroutines"},
		`histogram_quantile(0.95, sum without (pod) (rate(x_bucket[1m]))) * 3600`:                                   {"x_bucket"},
	} {
		if got := promqlNames(expr); !slices.Equal(got, want) {
			t.Errorf("promqlNames(%s) = %q, want %q", expr, got, want)
		}
	}
}
