package provider

import (
	"strings"
	"testing"
	"time"
)

func TestHedgeSettings(t *testing.T) {
	p := []Config{{Name: "a", BaseURL: "http://a.example/v1", Models: []string{"m1", "m2", "m3", "m4", "m5"}}}
	c, err := NewCatalog(p,
		Model{Name: "m1", FirstTokenSLA: 800 * time.Millisecond},
		Model{Name: "m2", FirstTokenSLA: time.Second, HedgeAfter: "p99.5", HedgeBudget: 0.05},
		Model{Name: "m4", HedgeBudget: 0.02},
		Model{Name: "m5", FirstTokenSLA: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		want  Hedge
	}{
		{"m1", Hedge{SLA: 800 * time.Millisecond, Scale: 1, Floor: MinHedgeDelay, Budget: DefaultHedgeBudget}},
		{"m2", Hedge{SLA: time.Second, Quantile: 0.995, Scale: 1, Floor: MinHedgeDelay, Budget: 0.05}},
		// No first_token_sla: the adaptive default, with or without an
		// entry; a negative one: none.
		{"m3", Hedge{Quantile: DefaultHedgeQuantile, Scale: DefaultHedgeScale, Floor: DefaultHedgeFloor, Budget: DefaultHedgeBudget}},
		{"m4", Hedge{Quantile: DefaultHedgeQuantile, Scale: DefaultHedgeScale, Floor: DefaultHedgeFloor, Budget: 0.02}},
		{"m5", Hedge{}},
	} {
		if got := c.Hedge(tc.model); got != tc.want {
			t.Errorf("Hedge(%s) = %+v, want %+v", tc.model, got, tc.want)
		}
	}
	if c.Hedge("m5").On() {
		t.Error("a model with a negative first_token_sla hedges")
	}
}

func TestHedgeSettingsNameTheBadKey(t *testing.T) {
	p := []Config{{Name: "a", BaseURL: "http://a.example/v1", Models: []string{"m"}}}
	for _, tc := range []struct {
		m    Model
		want string
	}{
		{Model{Name: "m", FirstTokenSLA: time.Millisecond}, "models[0].first_token_sla"},
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
