package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

func TestStatusPrintsTheEdgesJSON(t *testing.T) {
	now := time.Now()
	st := fleet.Status{
		Coordinator: wire.Lease{Holder: "coordinator@a"},
		Health:      []wire.Health{{Provider: "openai", State: wire.HealthRed, Breaker: "open", LastError: "circuit breaker open", CheckedAt: now.Unix()}},
		Breakers: []fleet.BreakerStatus{{Scope: "openai", Provider: "openai",
			State: breaker.State{Phase: breaker.Open, Since: now, Trips: 2, Until: now.Add(20 * time.Second), By: "w1", Reason: "3 failures in a row"}}},
		Quotas: fleet.QuotaStatus{Limits: []fleet.LimitStatus{{Key: "p.openai.rpm", PerMinute: 600, Used: 580, Demand: 900, Nodes: 3}},
			Nodes: []fleet.NodeStatus{{Node: "w1", Role: "worker", At: now}}},
		Keys: []fleet.KeyStatus{{Provider: "openai", Index: 1, Fingerprint: "sha256:0123456789ab", State: "failed",
			Reason: "refused: HTTP 401 Unauthorized", CheckedAt: now, Workers: 2}},
		Log: []streams.PartitionInfo{{Stream: "RELAY_CHUNKS", Leader: "n1", Replicas: 3, Messages: 120, Bytes: 3 << 20, MaxBytes: 682 << 20},
			{Stream: "RELAY_CHUNKS_1", Leader: "n2", Replicas: 3, Messages: 118, Bytes: 1 << 20, MaxBytes: 682 << 20}},
	}
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/relay/status" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(st)
	}))
	defer edge.Close()

	var out, errOut bytes.Buffer
	if err := run([]string{"status", "--edge", edge.URL, "--key", "k"}, &out, &errOut); err != nil {
		t.Fatal(err, errOut.String())
	}
	got := out.String()
	for _, want := range []string{"coordinator@a", "PROVIDERS", "health red, breaker open", "BREAKERS", "p.openai.rpm", "600", "3 failures in a row",
		"NODES", "worker  w1", "API KEYS", "#1", "sha256:0123456789ab", "refused: HTTP 401 Unauthorized",
		"LOG", "RELAY_CHUNKS_1  n2      3         118     1.0 MiB of 682.0 MiB"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	// Not a terminal: no colours.
	if strings.Contains(got, "\x1b[") {
		t.Errorf("output to a buffer has escape codes:\n%s", got)
	}
	if err := run([]string{"status", "--edge", edge.URL}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("without the key: %v", err)
	}
}

// --watch takes no --json and a positive --interval; --help describes the
// colours and succeeds.
func TestStatusWatchFlags(t *testing.T) {
	for _, args := range [][]string{{"status", "--watch", "--json"}, {"status", "--watch", "--interval", "0s"}} {
		var out, errOut bytes.Buffer
		if err := run(args, &out, &errOut); err == nil {
			t.Errorf("%q succeeded", args)
		}
	}
	var out, errOut bytes.Buffer
	if err := run([]string{"status", "--help"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-watch", "-interval", "green", "yellow  a breaker half-open", "red     a breaker open", "NO_COLOR"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
}
