package fleet_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
)

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// bucket opens a shared bucket of srv on a connection of its own.
func bucket(t *testing.T, srv *server.Server, name string) jetstream.KeyValue {
	t.Helper()
	_, js := relaytest.Connect(t, srv, streams.Topology{})
	kv, err := js.KeyValue(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}
