package worker

import (
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/apikeys"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/wire"
)

// noKeyChecks turns verify_keys off, for the tests of what a refusal at
// run time does.
var noKeyChecks = false

// keyGate is the open gate, taking the worker's key report as the shared
// gate does.
type keyGate struct {
	openGate
	report func() map[string][]quota.APIKey
}

func (g *keyGate) ReportKeys(f func() map[string][]quota.APIKey) { g.report = f }

func TestARefusedKeyIsReportedAndNeverUsed(t *testing.T) {
	gate := &keyGate{}
	h := start(t, setup{
		mock: mockupstream.Config{TokenInterval: -1, APIKeys: []string{"good"}},
		providers: func(url string) []provider.Config {
			return []provider.Config{{Name: "mock", BaseURL: url, APIKeys: []string{"bad", "good"}, Models: []string{"mock-1"}, Retry: fastRetry}}
		},
		gate: gate,
	})
	for range 3 {
		id := wire.NewStreamID()
		h.submit(id, "hello")
		if end := endOf(h.waitEnd(id)); end.Status != wire.StatusDone {
			t.Fatalf("end = %+v", end)
		}
	}
	st := h.mock.Stats()
	if want := map[string]int{"good": 3}; !maps.Equal(st.ByKey, want) {
		t.Fatalf("calls by key %v, want %v: the refused key took traffic", st.ByKey, want)
	}
	if want := map[string]int{"bad": 1, "good": 1}; !maps.Equal(st.ModelsByKey, want) {
		t.Fatalf("checks by key %v, want %v", st.ModelsByKey, want)
	}
	line, ok := h.logs.find(func(l map[string]string) bool { return l["level"] == "WARN" && l["provider"] == "mock" })
	if !ok || line["key_index"] != "0" || line["key_fingerprint"] != apikeys.Fingerprint("bad") || !strings.Contains(line["reason"], "401") {
		t.Fatalf("warning %v, want key 0 by its fingerprint, refused with 401", line)
	}
	if _, leaked := h.logs.find(func(l map[string]string) bool {
		for _, v := range l {
			if v == "bad" || v == "good" {
				return true
			}
		}
		return false
	}); leaked {
		t.Fatal("a key was logged")
	}
	keys := gate.report()["mock"]
	if len(keys) != 2 || keys[0].State != "failed" || keys[0].Fingerprint != apikeys.Fingerprint("bad") || keys[1].State != "verified" {
		t.Fatalf("key report %+v, want bad failed and good verified", keys)
	}
}

// A provider that cannot tell (its model list down) has its keys used as
// before: an outage never makes the relay refuse its own keys.
func TestKeysServeWhileTheProviderCannotTell(t *testing.T) {
	gate := &keyGate{}
	h := start(t, setup{
		mock: mockupstream.Config{TokenInterval: -1, APIKeys: []string{"key-1"}},
		wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/models" {
					http.Error(w, `{"error":{"message":"down","type":"server_error"}}`, http.StatusServiceUnavailable)
					return
				}
				next.ServeHTTP(w, r)
			})
		},
		gate: gate,
	})
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool {
		keys := gate.report()["mock"]
		return len(keys) == 1 && keys[0].State == "pending" && strings.Contains(keys[0].Reason, "503")
	})
	id := wire.NewStreamID()
	h.submit(id, "hello")
	if end := endOf(h.waitEnd(id)); end.Status != wire.StatusDone {
		t.Fatalf("end = %+v", end)
	}
	if n := h.mock.Stats().ByKey["key-1"]; n != 1 {
		t.Fatalf("%d calls with key-1, want 1", n)
	}
	if keys := gate.report()["mock"]; keys[0].State != "verified" {
		t.Fatalf("key report %+v, want key-1 verified by the call that succeeded", keys)
	}
}
