package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/wire"
)

const keyOps = "sk-test-ops"

// operatorConfig is tenantConfig with an operator's key.
func operatorConfig() Config {
	cfg := tenantConfig()
	cfg.APIKeys = append(cfg.APIKeys, APIKey{Tenant: "ops", KeySHA256: keyHash(keyOps), Operator: true})
	return cfg
}

// putState writes a KV entry of the shared state as the coordinator would.
func (e *env) putState(bucket, key string, v any) {
	e.t.Helper()
	kv, err := e.js.KeyValue(context.Background(), bucket)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), key, mustJSON(e.t, v)); err != nil {
		e.t.Fatal(err)
	}
}

func TestOperatorEndpointsNeedAnOperatorKey(t *testing.T) {
	e := newEnv(t)
	te := e.startEdge(operatorConfig())
	for _, path := range []string{"/metrics", "/v1/relay/dashboard.json"} {
		for _, tc := range []struct {
			name   string
			header http.Header
			status int
			code   string
		}{
			{"no key", nil, http.StatusUnauthorized, CodeInvalidAPIKey},
			{"a wrong key", bearerHeader("sk-nope"), http.StatusUnauthorized, CodeInvalidAPIKey},
			{"a tenant's key", bearerHeader(keyAcme), http.StatusForbidden, CodeOperatorOnly},
		} {
			res := do(t, http.MethodGet, te.url+path, "", tc.header)
			if got := decodeError(t, res); res.StatusCode != tc.status || got.Code != tc.code {
				t.Errorf("%s with %s: status %d, error %+v; want %d %s", path, tc.name, res.StatusCode, got, tc.status, tc.code)
			}
		}
		if res := do(t, http.MethodGet, te.url+path, "", bearerHeader(keyOps)); res.StatusCode != http.StatusOK {
			t.Errorf("%s with the operator's key: status %d, %s", path, res.StatusCode, readAll(t, res))
		}
	}
	res := do(t, http.MethodGet, te.url+"/metrics", "", bearerHeader(keyOps))
	if body := readAll(t, res); !strings.Contains(body, "relay_edge_") {
		t.Errorf("/metrics for the operator has no relay_edge_ family: %.300s", body)
	}
}

func TestStatusShowsATenantOnlyItsOwn(t *testing.T) {
	e := newEnv(t)
	te := e.startEdge(operatorConfig())
	e.putState(wire.QuotaBucket, fleet.LimitsKey, quota.Limits{TenantRPM: 5, Tenants: map[string]float64{"acme": 10, "beta": 20}})
	e.putState(wire.LeaseBucket, wire.CoordinatorLeaseKey, wire.Lease{Holder: "host-a-4242", Since: time.Now(), TTLMS: 5000})

	status := func(key string) (fleet.Status, string) {
		t.Helper()
		res := do(t, http.MethodGet, te.url+"/v1/relay/status", "", bearerHeader(key))
		body := readAll(t, res)
		var st fleet.Status
		if res.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
		return st, body
	}
	st, body := status(keyAcme)
	if st.Quotas.Tenants == nil || st.Quotas.Tenants.TenantRPM != 10 || len(st.Quotas.Tenants.Tenants) != 0 {
		t.Errorf("acme's tenant limits: %+v; want its own 10 rpm only", st.Quotas.Tenants)
	}
	if strings.Contains(body, "beta") || strings.Contains(body, "host-a-4242") {
		t.Errorf("acme sees another tenant or a node's name: %s", body)
	}
	st, body = status(keyOps)
	if st.Quotas.Tenants == nil || st.Quotas.Tenants.Tenants["beta"] != 20 || st.Coordinator.Holder != "host-a-4242" {
		t.Errorf("the operator's status: %s; want every tenant and the coordinator", body)
	}
}
