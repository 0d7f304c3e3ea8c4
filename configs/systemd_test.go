package configs_test

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/ociimage"
)

// unitFile is a systemd unit: directive values by section and key, in
// order (a key may repeat).
type unitFile map[string]map[string][]string

// directives are the keys the relay's units may use, by section; a key
// systemd does not know is only a warning in its log, so a misspelt
// hardening option would silently not apply. This list fails the test
// instead.
var directives = map[string][]string{
	"Unit":    {"Description", "Documentation", "After", "Wants"},
	"Install": {"WantedBy"},
	"Service": {"Type", "ExecStart", "EnvironmentFile", "User", "Group", "DynamicUser", "Restart", "RestartSec",
		"KillSignal", "KillMode", "TimeoutStopSec", "LimitNOFILE", "NoNewPrivileges", "ProtectSystem", "ProtectHome",
		"PrivateTmp", "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
		"ProtectControlGroups", "ProtectClock", "ProtectHostname", "RestrictAddressFamilies", "RestrictNamespaces",
		"RestrictRealtime", "RestrictSUIDSGID", "LockPersonality", "MemoryDenyWriteExecute", "SystemCallArchitectures",
		"SystemCallFilter", "SystemCallErrorNumber", "CapabilityBoundingSet", "AmbientCapabilities", "UMask"},
}

// parseUnit reads a unit file: [Section] headers, Key=Value lines,
// comments (# and ;); a key outside directives fails the test.
func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			if _, ok := directives[section]; !ok {
				t.Errorf("%s:%d: unexpected section [%s]", path, i+1, section)
			}
			u[section] = map[string][]string{}
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.HasSuffix(line, `\`) {
				t.Fatalf("%s:%d: cannot read %q", path, i+1, line)
			}
			if key = strings.TrimSpace(key); !slices.Contains(directives[section], key) {
				t.Errorf("%s:%d: %s is not a directive of [%s] this test knows", path, i+1, key, section)
			}
			u[section][key] = append(u[section][key], strings.TrimSpace(value))
		}
	}
	return u
}

// one is the single value of section.key, "" when unset.
func (u unitFile) one(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// TestSystemdUnits checks the unit of each role: ExecStart runs the
// image's binary path with the unit's role and an example configuration
// that exists in configs/ (installed to /etc/relay, as in the image) and
// loads for the role; SIGTERM stops it, and TimeoutStopSec leaves more
// than that configuration's drain timeout; it runs unprivileged behind
// the hardening options.
func TestSystemdUnits(t *testing.T) {
	for _, role := range []config.Role{config.RoleEdge, config.RoleWorker, config.RoleCoordinator} {
		path := filepath.Join("systemd", "relay-"+string(role)+".service")
		u := parseUnit(t, path)
		exec := strings.Fields(u.one("Service", "ExecStart"))
		if len(exec) != 4 || exec[0] != ociimage.Binary || exec[1] != string(role) || exec[2] != "--config" {
			t.Errorf("%s: ExecStart %q, want %s %s --config <file>", path, exec, ociimage.Binary, role)
			continue
		}
		rel, ok := strings.CutPrefix(exec[3], ociimage.ConfigDir+"/")
		if !ok || !exists(t, rel) {
			t.Errorf("%s: --config %s is not an example configuration of configs/ installed to %s", path, exec[3], ociimage.ConfigDir)
			continue
		}
		src := config.Sources{File: rel}
		if role == config.RoleEdge {
			// What edge.env or a second file must set: the example
			// keys and secret are refused.
			src.Overlays = []string{ownCredentials(t)}
		}
		cfg, err := config.Load(src, role)
		if err != nil {
			t.Errorf("%s: %s: %v", path, rel, err)
			continue
		}
		stop, err := time.ParseDuration(u.one("Service", "TimeoutStopSec"))
		if err != nil || !strings.HasSuffix(u.one("Service", "TimeoutStopSec"), "s") {
			t.Errorf("%s: TimeoutStopSec %q: want seconds, as 40s", path, u.one("Service", "TimeoutStopSec"))
		}
		if stop <= cfg.Worker.DrainTimeout {
			t.Errorf("%s: TimeoutStopSec %v does not cover drain_timeout %v", path, stop, cfg.Worker.DrainTimeout)
		}
		for key, want := range map[string]string{
			"KillSignal": "SIGTERM", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
			"ProtectHome": "yes", "CapabilityBoundingSet": "", "Restart": "on-failure",
		} {
			if got := u.one("Service", key); got != want {
				t.Errorf("%s: %s=%q, want %q", path, key, got, want)
			}
		}
		if u.one("Service", "DynamicUser") != "yes" && (u.one("Service", "User") == "" || u.one("Service", "User") == "root") {
			t.Errorf("%s: runs as root: set DynamicUser=yes or User=relay", path)
		}
		if u.one("Install", "WantedBy") != "multi-user.target" {
			t.Errorf("%s: not wanted by multi-user.target", path)
		}
	}
}

// ownCredentials is an overlay of fresh client keys and resume token
// secret, what an operator adds over configs/edge.yaml: its published
// examples are refused.
func ownCredentials(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "credentials.yaml")
	own := fmt.Sprintf("edge:\n  api_keys:\n    - {tenant: acme, key_sha256: %x}\n    - {tenant: beta, key_sha256: %x, models: [mock-1]}\n  resume_token_secret: %s\n",
		sha256.Sum256([]byte(rand.Text())), sha256.Sum256([]byte(rand.Text())), rand.Text()+rand.Text())
	if err := os.WriteFile(path, []byte(own), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
