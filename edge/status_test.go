package edge

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/natsserver"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// An edge whose NATS user may not read a bucket of the status gets a 503
// that names the denied subject at once, not after statusTimeout.
func TestStatusDeniedReadFailsFast(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	err := os.WriteFile(conf, []byte(fmt.Sprintf(`
listen: 127.0.0.1:-1
jetstream { store_dir: %q }
accounts {
  RELAY {
    jetstream: enabled
    users: [
      { user: admin, password: admin }
      { user: edge, password: edge, permissions: {
          publish: { deny: ["$JS.API.CONSUMER.CREATE.KV_relay_health", "$JS.API.CONSUMER.CREATE.KV_relay_health.>"] } } }
    ]
  }
}
no_auth_user: admin
`, filepath.Join(dir, "js"))), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsserver.StartFile(conf, natsserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	relaytest.Connect(t, srv, streams.Topology{MemoryStorage: true}) // as admin: sets the buckets up

	nc, js, err := natsconn.Connect(natsconn.Config{URL: srv.ClientURL(), User: "edge", Password: "edge"}, t.Name(), relaytest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s, err := New(Config{}, Deps{NC: nc, JS: js, Catalog: testCatalog(t), Logger: relaytest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/relay/status", nil))
	took := time.Since(start)
	var got struct{ Error wire.Error }
	if err := decodeInto(rec.Body.String(), &got); err != nil || rec.Code != http.StatusServiceUnavailable ||
		!strings.Contains(got.Error.Message, "permissions violation") || !strings.Contains(got.Error.Message, "KV_relay_health") {
		t.Fatalf("%d %s (%v)", rec.Code, rec.Body, err)
	}
	if took >= statusTimeout {
		t.Errorf("answered after %v, the whole timeout", took)
	}
}
