package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// `relay dev`'s embedded NATS refuses a local process without the random
// credentials of this run, while the roles in the process, which have
// them, serve.
func TestDevNATSRefusesUnauthenticated(t *testing.T) {
	addrs := startDev(t, "")

	nc, err := nats.Connect(addrs.NATS, nats.NoReconnect())
	if err == nil {
		nc.Close()
		t.Fatal("an unauthenticated client connected to dev's NATS")
	}
	// The server's -ERR text, which nats.go does not map to its sentinel.
	if !strings.EqualFold(err.Error(), nats.ErrAuthorization.Error()) {
		t.Errorf("unauthenticated: %v; want %v", err, nats.ErrAuthorization)
	}
	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	if status, _, body := fetch(client, "http://"+addrs.Edge+"/readyz"); status != http.StatusOK {
		t.Errorf("the edge of dev: /readyz %d %s; want the roles connected with the credentials", status, body)
	}
}
