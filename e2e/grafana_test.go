package e2e

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
)

// dashboard is the part of Grafana's dashboard model that holds queries.
type dashboard struct {
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // a collapsed row's
}

// ruleFile is Prometheus's rule-file shape, decoded strictly.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestDashboardAndAlertsUseExportedFamilies runs the roles (edge, worker,
// coordinator) as the relay binary runs them, drives the events behind
// the families that appear only once they happen (a stream, a breaker
// opening), and scrapes every role's /metrics. Every metric name in the
// dashboard's queries and variables and in the alert rules must be a
// family one of them exports (a histogram's _bucket, _sum and _count
// included), or Prometheus's own `up`; every relay family must be on the
// dashboard; and an alert fires on any sequence gap.
func TestDashboardAndAlertsUseExportedFamilies(t *testing.T) {
	used := map[string][]string{} // name → where
	var dash dashboard
	readJSON(t, "../configs/grafana/relay-dashboard.json", &dash)
	for _, p := range flattenPanels(dash.Panels) {
		for _, tg := range p.Targets {
			for _, n := range promqlNames(tg.Expr) {
				used[n] = append(used[n], "panel "+p.Title)
			}
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok && v.Type == "query" {
			m := grafanaLabelValues.FindStringSubmatch(q)
			if m == nil {
				t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, q)
				continue
			}
			used[m[1]] = append(used[m[1]], "variable "+v.Name)
		}
	}
	gaps := false
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			for _, n := range promqlNames(r.Expr) {
				used[n] = append(used[n], "alert "+r.Alert)
			}
			gaps = gaps || (strings.Contains(r.Expr, "increase(relay_sequence_gaps_total") && strings.HasSuffix(strings.TrimSpace(r.Expr), "> 0"))
		}
	}
	if !gaps {
		t.Error("no alert fires when relay_sequence_gaps_total increases")
	}

	exported := exportedFamilies(t)
	for name, where := range used {
		if !exported[name] && name != "up" {
			t.Errorf("%s (%s) is not a family the roles export", name, strings.Join(slices.Compact(where), ", "))
		}
	}
	for name := range exported {
		if strings.HasPrefix(name, "relay_") && !strings.HasSuffix(name, "_sum") && !strings.HasSuffix(name, "_bucket") && !strings.HasSuffix(name, "_count") && used[name] == nil && used[name+"_bucket"] == nil {
			t.Errorf("%s is exported but not on the dashboard", name)
		}
	}
}

// exportedFamilies are the names the running roles' /metrics expose: each
// family, and for a histogram its series' names.
func exportedFamilies(t *testing.T) map[string]bool {
	t.Helper()
	sys := start(t, options{Coordinator: true, Mock: mockupstream.Config{Tokens: 6, TokenInterval: time.Millisecond}, Tune: withOpsModels(nil)})
	if a := ask(t, sys.Edge, "mock-1", "grafana: plain"); a.status != "done" {
		t.Fatalf("plain answer: status %s", a.status)
	}
	holdOpenBreaker(t, sys, "grafana: breaker")
	relaytest.Eventually(t, 15*time.Second, 50*time.Millisecond, func() bool {
		_, ok := sample(scrape(t, sys.Worker), "relay_breaker_transitions_total", "to", "open")
		return ok
	})

	names := map[string]bool{}
	for _, base := range []string{sys.Edge, sys.Worker, sys.Coordinator} {
		for name, mf := range scrape(t, base) {
			names[name] = true
			if mf.GetType() == dto.MetricType_HISTOGRAM {
				names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
			}
		}
	}
	return names
}

// flattenPanels is every panel, those inside collapsed rows included.
func flattenPanels(ps []dashboardPanel) []dashboardPanel {
	var out []dashboardPanel
	for _, p := range ps {
		out = append(append(out, p), flattenPanels(p.Panels)...)
	}
	return out
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	f, err := os.Open("../configs/grafana/relay.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rf ruleFile
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("relay.rules.yml: %v", err)
	}
	return rf
}
