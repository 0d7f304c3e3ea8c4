package app_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpsMetricsNameNoTenantUnlessAsked: after a tenant's request, the
// /metrics of the worker's, the coordinator's and the edge's ops
// listeners, which ask for no key, carry no tenant's name: the worker's
// tokens count as tenant "other". With worker.tenants naming it, the
// worker's carry it.
func TestOpsMetricsNameNoTenantUnlessAsked(t *testing.T) {
	const key = "sk-ops-metrics-test-0123456789"
	sum := sha256.Sum256([]byte(key))
	keys := "edge:\n  resume_token_secret: ops-metrics-test-secret-0123456789abcdef\n  api_keys:\n" +
		"    - {tenant: acme, key_sha256: " + hex.EncodeToString(sum[:]) + "}\n" +
		"    - {tenant: beta, key_sha256: " + strings.Repeat("b", 64) + "}\n"
	for _, tc := range []struct {
		name, more string
		want       string
	}{
		{"default", "", `tenant="other"`},
		{"asked", "worker:\n  tenants: [acme]\n", `tenant="acme"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "relay.yaml")
			if err := os.WriteFile(file, []byte(keys+tc.more), 0o600); err != nil {
				t.Fatal(err)
			}
			a := startDev(t, file)
			req, _ := http.NewRequest("POST", "http://"+a.Edge+"/v1/chat/completions",
				strings.NewReader(`{"model":"`+a.Model+`","messages":[{"role":"user","content":"Hello"}]}`))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("acme's request: %d %s", res.StatusCode, b)
			}
			for _, ops := range []string{a.Worker, a.Coordinator, a.EdgeOps} {
				res, err := http.Get("http://" + ops + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				metrics := string(b)
				if res.StatusCode != http.StatusOK || !strings.Contains(metrics, "relay_tokens_total{") {
					t.Fatalf("%s/metrics: %d, without the worker's tokens", ops, res.StatusCode)
				}
				if !strings.Contains(metrics, tc.want) {
					t.Errorf("%s/metrics: no %s", ops, tc.want)
				}
				if tc.name == "default" && (strings.Contains(metrics, "acme") || strings.Contains(metrics, "beta")) {
					t.Errorf("%s/metrics names a tenant", ops)
				}
			}
		})
	}
}
