package metrics

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

// TestAlertRules loads configs/alerts/relay.rules.yml: it is valid YAML in
// Prometheus's rule-file shape, the sequence-gap alert fires on any gap,
// and every relay_* name it uses is a family this package defines.
func TestAlertRules(t *testing.T) {
	b, err := os.ReadFile("../../configs/alerts/relay.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	w, _ := NewWorker(reg, NewNames([]string{"p"}, []string{"m"}, nil))
	NewEdge(reg, &fakeEdge{})
	br, _ := NewBreaker(reg, NewNames([]string{"p"}, nil, nil))
	w.Usage("p", "m", "", 1, 1, 1)
	br.Transition("p", "", BreakerClosed, BreakerOpen, time.Time{})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, mf := range mfs {
		defined[mf.GetName()] = true
	}
	names := regexp.MustCompile(`relay_[a-z_]+`)
	gaps := false
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			for _, n := range names.FindAllString(r.Expr, -1) {
				if !defined[n] {
					t.Errorf("alert %s uses %s, which is not a relay family", r.Alert, n)
				}
			}
			if strings.Contains(r.Expr, "relay_sequence_gaps_total") && strings.HasSuffix(strings.TrimSpace(r.Expr), "> 0") {
				gaps = true
			}
		}
	}
	if !gaps {
		t.Error("no alert fires when relay_sequence_gaps_total increases")
	}
}
