package mockupstream

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	good := Config{Tokens: 5, TokenInterval: -1, CommentInterval: time.Second, APIKeys: []string{"k"}, Models: []string{"m"}, Faults: "cut_after=2, times=0"}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for want, cfg := range map[string]Config{
		"mock_upstream.tokens: must be between 1 and":          {Tokens: -1},
		"mock_upstream.comment_interval: must be >= 0":         {CommentInterval: -time.Second},
		"mock_upstream.api_keys[1]: must not be empty":         {APIKeys: []string{"k", ""}},
		"mock_upstream.models[0]: must not be empty":           {Models: []string{""}},
		`mock_upstream.models[1]: duplicate model "m"`:         {Models: []string{"m", "m"}},
		`mock_upstream.faults: directive "cut_after=-1": want`: {Faults: "cut_after=-1"},
	} {
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: error %v, want %q", cfg, err, want)
		}
		if _, err := New(cfg, nil); err == nil {
			t.Errorf("New(%+v) accepted an invalid config", cfg)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	d := Config{}.withDefaults()
	if d.Tokens != defaultTokens || d.TokenInterval != defaultTokenInterval || len(d.Models) != 2 {
		t.Fatalf("defaults = %+v", d)
	}
	if fast := (Config{TokenInterval: -1}).withDefaults(); fast.TokenInterval != 0 {
		t.Fatalf("negative TokenInterval became %v, want no pause", fast.TokenInterval)
	}
}
