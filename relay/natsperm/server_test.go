package natsperm_test

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/natsperm"
	"github.com/relaydev/relay/relay/natsserver"
)

// The generated account, for the servers of a region that is not the home,
// is what nats-server enforces: each node writes only the shared keys it
// owns, through the home's API and into the overlay, and the coordinator
// changes no stream.
func TestGeneratedRegionGrantsHoldOnAServer(t *testing.T) {
	dir := t.TempDir()
	nodes := natsperm.Nodes{natsperm.Edge: {"e1"}, natsperm.Worker: {"w1"}, natsperm.Coordinator: {"c1"}}
	if _, err := natsperm.Generate(dir, nodes, natsperm.Options{HomeDomain: "a"}, rand.Reader); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(conf, []byte("jetstream {}\ninclude ./accounts.conf\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := natsserver.StartFile(conf, natsserver.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })

	for _, c := range []struct {
		role          natsperm.Role
		node          string
		allow, refuse []string
	}{
		{natsperm.Edge, "e1",
			[]string{"$JS.a.API.$KV.relay_quotas.demand.edge.e1", "$KV.relay_quotas_overlay.demand.edge.e1"},
			[]string{"$KV.relay_quotas_overlay.demand.edge.e2", "$JS.a.API.$KV.relay_quotas.demand.edge.e2", "$KV.relay_quotas_overlay.limits", "$KV.relay_breakers_overlay.mock", "$JS.a.API.$KV.relay_leases.coordinator"}},
		{natsperm.Worker, "w1",
			[]string{"$KV.relay_breakers_overlay.mock", "$JS.a.API.$KV.relay_pauses.mock", "$KV.relay_quotas_overlay.demand.worker.w1"},
			[]string{"$KV.relay_quotas_overlay.demand.worker.w2", "$KV.relay_leases_overlay.coordinator", "$JS.a.API.$KV.relay_canaries.m"}},
		{natsperm.Coordinator, "c1",
			[]string{"$KV.relay_leases_overlay.coordinator", "$JS.a.API.$KV.relay_quotas.share.e1"},
			[]string{"$KV.relay_pauses_overlay.mock", "$JS.a.API.$KV.relay_quotas.demand.edge.e1", "$JS.API.STREAM.UPDATE.RELAY_REQUESTS", "$JS.API.STREAM.CREATE.KV_relay_breakers_overlay"}},
	} {
		t.Run(string(c.role), func(t *testing.T) {
			errs := make(chan error, 16)
			seed, err := nats.NkeyOptionFromSeed(filepath.Join(dir, natsperm.SeedFile(c.role, c.node)))
			if err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect(srv.ClientURL(), seed, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			refused := func(subject string) {
				t.Helper()
				if err := nc.Publish(subject, []byte("x")); err != nil {
					t.Fatal(err)
				}
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-errs:
					// Violations come in order: one naming another subject
					// refused an allowed publish before this one.
					if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), `"`+subject+`"`) {
						t.Fatalf("refusing %s, the server said: %v", subject, err)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("the server allowed %s", subject)
				}
			}
			for _, s := range c.allow {
				if err := nc.Publish(s, []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range c.refuse {
				refused(s)
			}
		})
	}
}
