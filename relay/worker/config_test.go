package worker

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string // substring of the error; "" for valid
	}{
		{Config{}, ""},
		{Config{ID: "w-1", MaxInflight: 1}, ""},
		{Config{MaxInflight: 1 << 12}, ""},
		{Config{MaxInflight: -1}, "worker.max_inflight:"},
		{Config{MaxInflight: 1<<12 + 1}, "worker.max_inflight:"},
		{Config{ID: "has space"}, "worker.id:"},
		{Config{ID: strings.Repeat("x", 129)}, "worker.id:"},
		{Config{HeartbeatInterval: 100 * time.Millisecond, LivenessTimeout: 300 * time.Millisecond}, ""},
		{Config{HeartbeatInterval: -1, DisablePeerWatch: true, DrainTimeout: -1, AppendRetry: -1}, ""},
		{Config{HeartbeatInterval: time.Millisecond}, "worker.heartbeat_interval:"},
		{Config{HeartbeatInterval: time.Second}, "worker.heartbeat_interval:"},
		{Config{LivenessTimeout: 50 * time.Millisecond}, "worker.liveness_timeout:"},
		{Config{LivenessTimeout: -time.Second}, "worker.liveness_timeout:"},
		{Config{LivenessTimeout: 600 * time.Millisecond}, "worker.liveness_timeout:"},
	} {
		err := tc.cfg.Validate("worker")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: unexpected error %v", tc.cfg, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one naming %q", tc.cfg, err, tc.want)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	a, b := Config{}.withDefaults(), Config{}.withDefaults()
	if a.MaxInflight != DefaultMaxInflight {
		t.Errorf("MaxInflight = %d, want %d", a.MaxInflight, DefaultMaxInflight)
	}
	if a.HeartbeatInterval != DefaultHeartbeatInterval || a.LivenessTimeout != DefaultLivenessTimeout ||
		a.DrainTimeout != DefaultDrainTimeout || a.AppendRetry != DefaultAppendRetry {
		t.Errorf("defaults = %+v", a)
	}
	if a.ID == "" || a.ID == b.ID {
		t.Errorf("default ids %q and %q: want unique non-empty ids", a.ID, b.ID)
	}
	if err := a.Validate("worker"); err != nil {
		t.Errorf("default config invalid: %v", err)
	}
}
