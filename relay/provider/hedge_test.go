package provider

import (
	"strings"
	"testing"
	"time"
)

func TestHedgeSettings(t *testing.T) {
	p := []Config{{Name: "a", BaseURL: "http://a.example/v1", Models: []string{"m1", "m2", "m3"}}}
	c, err := NewCatalog(p,
		Model{Name: "m1", FirstTokenSLA: 800 * time.Millisecond},
		Model{Name: "m2", FirstTokenSLA: time.Second, HedgeAfter: "p99.5", HedgeBudget: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		want  Hedge
	}{
		{"m1", Hedge{SLA: 800 * time.Millisecond, Budget: DefaultHedgeBudget}},
		{"m2", Hedge{SLA: time.Second, Quantile: 0.995, Budget: 0.05}},
		{"m3", Hedge{}},
	} {
		if got := c.Hedge(tc.model); got != tc.want {
			t.Errorf("Hedge(%s) = %+v, want %+v", tc.model, got, tc.want)
		}
	}
	if c.Hedge("m3").On() {
		t.Error("a model without first_token_sla hedges")
	}
}

func TestHedgeSettingsNameTheBadKey(t *testing.T) {
	p := []Config{{Name: "a", BaseURL: "http://a.example/v1", Models: []string{"m"}}}
	for _, tc := range []struct {
		m    Model
		want string
	}{
		{Model{Name: "m", FirstTokenSLA: -time.Second}, "models[0].first_token_sla"},
		{Model{Name: "m", HedgeAfter: "p95"}, "models[0].first_token_sla: required"},
		{Model{Name: "m", FirstTokenSLA: time.Second, HedgeAfter: "95"}, "models[0].hedge_after"},
		{Model{Name: "m", FirstTokenSLA: time.Second, HedgeAfter: "p100"}, "models[0].hedge_after"},
		{Model{Name: "m", FirstTokenSLA: time.Second, HedgeBudget: 2}, "models[0].hedge_budget"},
	} {
		_, err := NewCatalog(p, tc.m)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want prefix %s", tc.m, err, tc.want)
		}
	}
}
