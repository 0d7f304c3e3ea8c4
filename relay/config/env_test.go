package config

import (
	"slices"
	"testing"
)

// RELAY_ variables that set no key (a Kubernetes Service's links, the NATS
// server's passwords) are named, not refused; those that do set theirs.
func TestUnknownEnvIsIgnoredAndNamed(t *testing.T) {
	cfg, err := Load(Sources{Environ: []string{
		"RELAY_PORT=tcp://10.0.0.7:8080",
		"RELAY_SERVICE_HOST=10.0.0.7",
		"RELAY_PORT_8080_TCP_ADDR=10.0.0.7",
		"RELAY_NATS_EDGE_PASSWORD=s3cret",
		"RELAY_EDGE__LISTEN=127.0.0.1:2000",
		"RELAY_COORDINATOR__TENANT_LIMITS__ACME=60",
		"PATH=/bin",
	}}, RoleDev)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"RELAY_NATS_EDGE_PASSWORD", "RELAY_PORT", "RELAY_PORT_8080_TCP_ADDR", "RELAY_SERVICE_HOST"}
	if got := cfg.IgnoredEnv(); !slices.Equal(got, want) {
		t.Errorf("ignored %q, want %q", got, want)
	}
	if cfg.Edge.Listen != "127.0.0.1:2000" || cfg.Coordinator.TenantLimits["acme"] != 60 {
		t.Errorf("known keys not set: edge.listen %q, tenant limits %+v", cfg.Edge.Listen, cfg.Coordinator.TenantLimits)
	}
}

// The password configs/nats exports for a role's NATS user is that role's
// nats.password when it has a user and no password of its own.
func TestRolePasswordEnvIsTheRolesNATSPassword(t *testing.T) {
	environ := []string{"RELAY_NATS_WORKER_PASSWORD=w0rker", "RELAY_NATS_EDGE_PASSWORD=e4ge"}
	cfg, err := Load(Sources{File: writeFile(t, providersYAML+"nats:\n  user: worker\n"), Environ: environ}, RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NATS.Password != "w0rker" || !slices.Equal(cfg.IgnoredEnv(), []string{"RELAY_NATS_EDGE_PASSWORD"}) {
		t.Errorf("password %q, ignored %q", cfg.NATS.Password, cfg.IgnoredEnv())
	}
	cfg, err = Load(Sources{File: writeFile(t, providersYAML+"nats:\n  user: worker\n"), Environ: append(environ, "RELAY_NATS__PASSWORD=own")}, RoleWorker)
	if err != nil || cfg.NATS.Password != "own" {
		t.Errorf("RELAY_NATS__PASSWORD is overridden: %q %v", cfg.NATS.Password, err)
	}
	// Without a user (a token, a creds file), the variable sets nothing.
	cfg, err = Load(Sources{File: writeFile(t, providersYAML+"nats:\n  token: t0ken\n"), Environ: environ}, RoleWorker)
	if err != nil || cfg.NATS.Password != "" {
		t.Errorf("password %q without a user: %v", cfg.NATS.Password, err)
	}
}
