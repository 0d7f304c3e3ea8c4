package streams_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/streams"
)

// TestSetupNeedsOnlyReadRightsOnceSetUp runs Setup as a user that may only
// look assets up, as edges and workers are under the shipped NATS
// permissions: it fails before an admin set up, passes after, and fails
// again when the settings changed, which only the admin may apply.
func TestSetupNeedsOnlyReadRightsOnceSetUp(t *testing.T) {
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(),
		Users: []*server.User{
			{Username: "admin", Password: "a"},
			{Username: "reader", Password: "r", Permissions: &server.Permissions{
				Publish: &server.SubjectPermission{Allow: []string{
					"$JS.API.INFO", "$JS.API.STREAM.INFO.>", "$JS.API.CONSUMER.INFO.>",
				}},
				Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	connect := func(user, password string) jetstream.JetStream {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(user, password))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	admin, reader := connect("admin", "a"), connect("reader", "r")
	// A refused request is never answered: a Setup that must fail gives up
	// after a second.
	setup := func(js jetstream.JetStream, top streams.Topology, mustFail bool) error {
		wait := 10 * time.Second
		if mustFail {
			wait = time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := streams.Setup(ctx, js, top); err != nil {
			return err
		}
		_, err := streams.OpenHandovers(ctx, js, top)
		return err
	}

	if err := setup(reader, streams.Topology{}, true); err == nil {
		t.Fatal("a reader set the assets up: the test's permissions are too wide")
	}
	if err := setup(admin, streams.Topology{}, false); err != nil {
		t.Fatalf("admin: %v", err)
	}
	if err := setup(reader, streams.Topology{}, false); err != nil {
		t.Fatalf("reader after the admin set up: %v", err)
	}
	for name, changed := range map[string]streams.Topology{
		"retention": {Retention: time.Hour},
		"ack wait":  {AckWait: 9 * time.Second},
		"storage":   {Storage: streams.StorageLimits{Chunks: 4096}},
	} {
		if err := setup(reader, changed, true); err == nil {
			t.Fatalf("changed %s: a reader's Setup passed, so it did not notice the change", name)
		}
	}
	if err := setup(admin, streams.Topology{Retention: time.Hour, AckWait: 9 * time.Second}, false); err != nil {
		t.Fatalf("admin applying the changes: %v", err)
	}
	if err := setup(reader, streams.Topology{Retention: time.Hour, AckWait: 9 * time.Second}, false); err != nil {
		t.Fatalf("reader after the admin applied the changes: %v", err)
	}
}
