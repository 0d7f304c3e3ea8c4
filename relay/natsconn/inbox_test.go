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
