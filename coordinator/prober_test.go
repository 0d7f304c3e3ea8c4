package coordinator_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/coordinator"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// probeCfg probes often, and an idle breaker soon after its cooldown.
var probeCfg = coordinator.Config{HealthInterval: 100 * time.Millisecond, ProbeGrace: 100 * time.Millisecond}

// shared reads the breaker and the health of one provider.
type shared struct {
	breakers, health jetstream.KeyValue
}

func openShared(t *testing.T, js jetstream.JetStream) shared {
	t.Helper()
	b, err := js.KeyValue(t.Context(), wire.BreakerBucket)
	if err != nil {
		t.Fatal(err)
	}
	h, err := js.KeyValue(t.Context(), wire.HealthBucket)
	if err != nil {
		t.Fatal(err)
	}
	return shared{b, h}
}

// open writes an open breaker of key whose cooldown ends in 300ms, as a
// worker that saw the provider fail would.
func (s shared) open(t *testing.T, key string) {
	t.Helper()
	now := time.Now()
	data, _ := json.Marshal(breaker.State{Phase: breaker.Open, Since: now, Trips: 1, Until: now.Add(300 * time.Millisecond), By: "w1"})
	if _, err := s.breakers.Put(t.Context(), key, data); err != nil {
		t.Fatal(err)
	}
}

func (s shared) breaker(key string) breaker.State {
	var b breaker.State
	if e, err := s.breakers.Get(context.Background(), key); err == nil {
		json.Unmarshal(e.Value(), &b)
	}
	return b
}

func (s shared) healthOf(name string) wire.Health {
	var h wire.Health
	if e, err := s.health.Get(context.Background(), name); err == nil {
		json.Unmarshal(e.Value(), &h)
	}
	return h
}

// writeKeys replaces a key file the safe way, by renaming a new file over
// it.
func writeKeys(t *testing.T, path string, keys ...string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

func catalogOf(t *testing.T, providers ...provider.Config) *provider.Catalog {
	t.Helper()
	for i := range providers {
		providers[i].Breaker = breaker.Config{Cooldown: time.Second}
	}
	c, err := provider.NewCatalog(providers)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A provider that takes only the key of its api_keys_file is probed with
// it: its health turns green and its idle open breaker closes.
func TestProbeUsesTheKeyFile(t *testing.T) {
	srv := relaytest.NATS(t)
	_, js := relaytest.Connect(t, srv, streams.Topology{})
	st := openShared(t, js)
	_, url := startMock(t, mockupstream.Config{APIKeys: []string{"k1"}, Models: []string{"m"}})
	path := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, path, "# rotated by the vault", "k1")
	catalog := catalogOf(t, provider.Config{Name: "p", BaseURL: url, APIKeysFile: path, Models: []string{"m"}})
	st.open(t, "p")
	c := startCoordinator(t, srv, probeCfg, catalog, "c")
	relaytest.Eventually(t, 5*time.Second, 20*time.Millisecond, func() bool {
		return st.breaker("p").Current() == breaker.Closed && st.healthOf("p").State == wire.HealthGreen
	})
	if got := c.made(); !slices.Equal(got, []string{"open->half_open", "half_open->closed"}) {
		t.Fatalf("the coordinator made the transitions %v, want one probe that closed the breaker", got)
	}
}

// After a rotation the probe carries the new key: from a rewritten key
// file, and from the next of api_keys when the provider refuses the first.
func TestProbeFollowsKeyRotation(t *testing.T) {
	srv := relaytest.NATS(t)
	_, js := relaytest.Connect(t, srv, streams.Topology{})
	st := openShared(t, js)
	mock, url := startMock(t, mockupstream.Config{APIKeys: []string{"k1", "inline-new"}, Models: []string{"m"}})
	path := filepath.Join(t.TempDir(), "keys")
	writeKeys(t, path, "k1")
	catalog := catalogOf(t,
		provider.Config{Name: "file", BaseURL: url, APIKeysFile: path, Models: []string{"m"}},
		provider.Config{Name: "inline", BaseURL: url, APIKeys: []string{"inline-old", "inline-new"}, Models: []string{"m"}})
	c := startCoordinator(t, srv, probeCfg, catalog, "c")
	relaytest.Eventually(t, 5*time.Second, 20*time.Millisecond, func() bool {
		return st.healthOf("file").State == wire.HealthGreen && st.healthOf("inline").State == wire.HealthGreen
	})

	// The provider stops taking k1 and the file gets k2: the breaker a
	// worker opened with k1 is closed by a probe with k2.
	mock.SetAPIKeys([]string{"k2", "inline-new"})
	writeKeys(t, path, "k2")
	st.open(t, "file")
	relaytest.Eventually(t, 5*time.Second, 20*time.Millisecond, func() bool {
		h := st.healthOf("file")
		return st.breaker("file").Current() == breaker.Closed && h.State == wire.HealthGreen && h.CheckedAt > 0
	})
	if got := c.made(); !slices.Equal(got, []string{"open->half_open", "half_open->closed"}) {
		t.Fatalf("the coordinator made the transitions %v, want one probe that closed the breaker", got)
	}

	// SIGHUP's Reload re-reads the file, and says which one it cannot.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := c.c.Reload(); err == nil || !strings.Contains(err.Error(), "provider file:") {
		t.Fatalf("Reload of a missing file: %v, want an error naming provider file", err)
	}
}

// A provider whose GET /models answers while every chat call fails is not
// healthy, and a probe does not close its breaker; probe: models still
// judges by the model list, for a provider that wants no tokens spent.
func TestProbeJudgesByChat(t *testing.T) {
	srv := relaytest.NATS(t)
	_, js := relaytest.Connect(t, srv, streams.Topology{})
	st := openShared(t, js)
	mock, url := startMock(t, mockupstream.Config{Models: []string{"m"}, Faults: "status=503, times=0"})
	catalog := catalogOf(t,
		provider.Config{Name: "chat", BaseURL: url, Models: []string{"m"}},
		provider.Config{Name: "list", BaseURL: url, Models: []string{"m"}, Probe: provider.ProbeModels})
	st.open(t, "chat")
	c := startCoordinator(t, srv, probeCfg, catalog, "c")
	relaytest.Eventually(t, 5*time.Second, 20*time.Millisecond, func() bool {
		return slices.Contains(c.made(), "half_open->open") && st.healthOf("list").State == wire.HealthGreen
	})
	if b := st.breaker("chat"); b.Current() != breaker.Open || b.By != "c" {
		t.Fatalf("breaker after the probe: %+v, want reopened by the coordinator", b)
	}
	h := st.healthOf("chat")
	if h.State != wire.HealthRed || !strings.Contains(h.LastError, "503") {
		t.Fatalf("health %+v, want red with the chat call's 503", h)
	}
	if got := c.made(); slices.Contains(got, "half_open->closed") {
		t.Fatalf("the coordinator closed the breaker: %v", got)
	}
	if mock.Stats().ChatRequests == 0 {
		t.Fatal("no chat call reached the provider")
	}
}

// An Anthropic provider is probed in its own dialect, with its key in
// x-api-key: a Messages call, or its model list.
func TestProbeSpeaksAnthropic(t *testing.T) {
	srv := relaytest.NATS(t)
	_, js := relaytest.Connect(t, srv, streams.Topology{})
	st := openShared(t, js)
	mock, url := startMock(t, mockupstream.Config{APIKeys: []string{"sk-ant"}, Models: []string{"claude"}})
	catalog := catalogOf(t,
		provider.Config{Name: "messages", Type: provider.TypeAnthropic, BaseURL: url, APIKeys: []string{"sk-ant"}, Models: []string{"claude"}},
		provider.Config{Name: "list", Type: provider.TypeAnthropic, BaseURL: url, APIKeys: []string{"sk-ant"}, Models: []string{"claude"}, Probe: provider.ProbeModels})
	st.open(t, "messages")
	startCoordinator(t, srv, probeCfg, catalog, "c")
	relaytest.Eventually(t, 5*time.Second, 20*time.Millisecond, func() bool {
		return st.breaker("messages").Current() == breaker.Closed &&
			st.healthOf("messages").State == wire.HealthGreen && st.healthOf("list").State == wire.HealthGreen
	})
	if s := mock.Stats(); s.MessagesRequests == 0 || s.ChatRequests != 0 || s.ByStatus[401] != 0 {
		t.Fatalf("mock stats %+v, want Messages calls only, none refused", s)
	}
}
