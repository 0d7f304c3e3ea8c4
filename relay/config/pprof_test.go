package config

import (
	"strings"
	"testing"
)

// pprof_listen is read by every role, mock-upstream included, and a bad
// address stops the process with a message naming the key.
func TestPprofListen(t *testing.T) {
	for _, role := range []Role{RoleDev, RoleMockUpstream} {
		for _, addr := range []string{"127.0.0.1:6060", "127.0.0.1:0", "[::1]:6060", "0.0.0.0:6060", "localhost:6060"} {
			cfg, err := Load(Sources{Set: []string{"pprof_listen=" + addr}}, role)
			if err != nil {
				t.Errorf("%s: pprof_listen=%s: %v", role, addr, err)
				continue
			}
			if cfg.PprofListen != addr {
				t.Errorf("%s: pprof_listen = %q, want %q", role, cfg.PprofListen, addr)
			}
		}
		for _, addr := range []string{"6060", ":6060", "127.0.0.1:http", "127.0.0.1:70000", "127.0.0.1:-1"} {
			_, err := Load(Sources{Set: []string{"pprof_listen=" + addr}}, role)
			if err == nil || !strings.Contains(err.Error(), "pprof_listen") {
				t.Errorf("%s: pprof_listen=%s: err = %v, want it to name pprof_listen", role, addr, err)
			}
		}
	}
	cfg, err := Load(Sources{}, RoleDev)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PprofListen != "" {
		t.Errorf("pprof_listen defaults to %q, want empty (off)", cfg.PprofListen)
	}
}
