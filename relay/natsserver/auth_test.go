package natsserver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/natsserver"
)

func TestListenBeyondLoopbackNeedsCredentials(t *testing.T) {
	for _, tc := range []struct {
		cfg  natsserver.Config
		want string // "" for valid
	}{
		{natsserver.Config{Listen: "0.0.0.0:4222"}, "embedded_nats.listen: \"0.0.0.0:4222\" is reachable from other machines"},
		{natsserver.Config{Listen: ":4222"}, "embedded_nats.listen: "},
		{natsserver.Config{Listen: "192.168.1.7:4222"}, "embedded_nats.listen: "},
		{natsserver.Config{Listen: "0.0.0.0:4222", User: "u", Password: "p"}, ""},
		{natsserver.Config{Listen: "127.0.0.1:4222"}, ""},
		{natsserver.Config{Listen: "[::1]:-1"}, ""},
		{natsserver.Config{Listen: "localhost:0"}, ""},
		{natsserver.Config{}, ""},
		{natsserver.Config{User: "u"}, "embedded_nats.user, embedded_nats.password: set both or neither"},
	} {
		err := tc.cfg.Validate("embedded_nats")
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v; want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestRandomCredentialsRefuseOthers(t *testing.T) {
	cfg := natsserver.Config{StoreDir: t.TempDir()}.WithRandomCredentials()
	if cfg.User == "" || len(cfg.Password) < 20 {
		t.Fatalf("credentials %q / %d characters: want a user and a long random password", cfg.User, len(cfg.Password))
	}
	if again := (natsserver.Config{}).WithRandomCredentials(); again.Password == cfg.Password {
		t.Fatal("two calls gave the same password")
	}
	hub := natsserver.Config{Domain: "a", Leaf: natsserver.LeafConfig{Listen: "127.0.0.1:-1"}}.WithRandomCredentials()
	if hub.User != "" || hub.Password != "" {
		t.Error("a leaf hub got random credentials, which its regions' leaf connections cannot send")
	}
	srv, err := natsserver.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })

	for name, opts := range map[string][]nats.Option{
		"no credentials":   nil,
		"a wrong password": {nats.UserInfo(cfg.User, "guess")},
	} {
		nc, err := nats.Connect(srv.ClientURL(), append(opts, nats.NoReconnect())...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected; want the server to refuse it", name)
		} else if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: %v; want an authorization error", name, err)
		}
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(cfg.User, cfg.Password))
	if err != nil {
		t.Fatalf("with the credentials: %v", err)
	}
	defer nc.Close()
	// The roles' user has JetStream, which holds the streams.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream with the credentials: %v", err)
	}
}
