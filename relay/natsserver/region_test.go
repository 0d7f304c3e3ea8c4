package natsserver_test

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/relaydev/relay/relay/natsserver"
	"github.com/relaydev/relay/relay/relaytest"
)

func TestRegionConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  natsserver.Config
		want string // "" for valid
	}{
		{natsserver.Config{}, ""},
		{natsserver.Config{Domain: "a", Leaf: natsserver.LeafConfig{Listen: "127.0.0.1:-1"}}, ""},
		{natsserver.Config{Domain: "b", Leaf: natsserver.LeafConfig{Remotes: []string{"nats-leaf://u:p@hub:7422"}}}, ""},
		{natsserver.Config{Leaf: natsserver.LeafConfig{Listen: "127.0.0.1:7422"}}, "x.domain: required"},
		{natsserver.Config{Domain: "a.b"}, "x.domain"},
		{natsserver.Config{Domain: "b", Leaf: natsserver.LeafConfig{Remotes: []string{"http://hub:7422"}}}, "x.leaf.remotes[0]"},
		{natsserver.Config{Domain: "a", Leaf: natsserver.LeafConfig{Listen: "nohost"}}, "x.leaf.listen"},
	} {
		err := tc.cfg.Validate("x")
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: got %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// The shipped region configurations (configs/regions/nats-*.conf) join
// the regions: the leaf authenticates with its nkey, each region keeps its
// own JetStream domain, the other's is reachable by its prefix, and the
// relay's own subjects stay in their region.
func TestRegionConfigFilesJoin(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	t.Setenv("RELAY_NATS_LEAF_NKEY", pub)
	t.Setenv("RELAY_NATS_LEAF_SEED", string(seed))

	dir := filepath.Join("..", "..", "configs", "regions")
	a := startConf(t, filepath.Join(dir, "nats-a.conf"), func(o *server.Options) {
		o.LeafNode.Host, o.LeafNode.Port = "127.0.0.1", server.RANDOM_PORT
	})
	hub, err := natsserver.LeafURL(a)
	if err != nil {
		t.Fatal(err)
	}
	b := startConf(t, filepath.Join(dir, "nats-b.conf"), func(o *server.Options) {
		if len(o.LeafNode.Remotes) != 1 {
			t.Fatalf("nats-b.conf: %d leaf remotes, want 1", len(o.LeafNode.Remotes))
		}
		r := o.LeafNode.Remotes[0]
		for _, deny := range [][]string{r.DenyImports, r.DenyExports} {
			if strings.Join(deny, ",") != "relay.>" {
				t.Errorf("nats-b.conf: the remote denies %v, want relay.> both ways", deny)
			}
		}
		u, err := url.Parse(hub)
		if err != nil {
			t.Fatal(err)
		}
		r.URLs = []*url.URL{u}
	})
	relaytest.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool {
		return natsserver.LeafConnected(a) && natsserver.LeafConnected(b)
	})

	ncA, ncB := dial(t, a), dial(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tc := range []struct {
		nc     *nats.Conn
		domain string
	}{{ncB, "a"}, {ncB, "b"}, {ncA, "a"}, {ncA, "b"}} {
		js, err := jetstream.NewWithDomain(tc.nc, tc.domain)
		if err != nil {
			t.Fatal(err)
		}
		info, err := js.AccountInfo(ctx)
		if err != nil || info.Domain != tc.domain {
			t.Errorf("domain %s from %s: %+v, %v", tc.domain, tc.nc.ConnectedServerName(), info, err)
		}
	}

	heard := make(chan string, 2)
	for _, nc := range []*nats.Conn{ncA, ncB} {
		sub, err := nc.Subscribe("relay.>", func(m *nats.Msg) { heard <- m.Subject })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		must(t, nc.Flush())
	}
	must(t, ncA.Publish("relay.requests", nil))
	must(t, ncB.Publish("relay.chunks.x", nil))
	got := map[string]bool{<-heard: true, <-heard: true}
	select {
	case s := <-heard:
		t.Fatalf("%s crossed the leaf connection", s)
	case <-time.After(100 * time.Millisecond):
	}
	if !got["relay.requests"] || !got["relay.chunks.x"] {
		t.Fatalf("each region should hear its own: %v", got)
	}
}

func startConf(t *testing.T, path string, adjust func(*server.Options)) *server.Server {
	t.Helper()
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", server.RANDOM_PORT, 0
	opts.StoreDir = t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	adjust(opts)
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("%s: not ready", path)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func dial(t *testing.T, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
