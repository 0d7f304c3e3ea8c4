package natsconn_test

import (
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/relaytest"
)

// A role's connection asks for its replies under its own prefix
// (configs/nats grants each role only its own), a configured prefix
// wins over the role's, and one nats.go would refuse is refused at
// validation, with the key named.
func TestInboxPrefixPerRole(t *testing.T) {
	srv := relaytest.NATS(t)
	nc, _, err := natsconn.Connect(natsconn.Config{URL: srv.ClientURL()}.ForRole("worker"), "test", relaytest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if inbox := nc.NewInbox(); !strings.HasPrefix(inbox, "_INBOX.worker.") {
		t.Fatalf("a worker's inbox is %q", inbox)
	}
	// A node with its own identity (nats.node) asks under its own name,
	// the only inbox its user may read.
	if got := (natsconn.Config{Node: "edge-2"}).ForRole("edge").InboxPrefix; got != "_INBOX.edge.edge-2" {
		t.Fatalf("edge-2's prefix is %q", got)
	}
	if err := (natsconn.Config{Node: "edge.2"}).Validate("nats"); err == nil || !strings.Contains(err.Error(), "nats.node") {
		t.Errorf("node edge.2: %v, want an error naming nats.node", err)
	}
	if got := (natsconn.Config{InboxPrefix: "_R.w1"}).ForRole("worker").InboxPrefix; got != "_R.w1" {
		t.Fatalf("configured prefix replaced by %q", got)
	}
	for _, bad := range []string{"_INBOX.>", "_INBOX.*", "_INBOX.", "a..b", "with space"} {
		err := natsconn.Config{InboxPrefix: bad}.Validate("nats")
		if err == nil || !strings.Contains(err.Error(), "nats.inbox_prefix") {
			t.Errorf("prefix %q: %v, want an error naming nats.inbox_prefix", bad, err)
		}
	}
}
