package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
)

// TestRequestIDsReachTheProvider: the client's X-Request-Id reaches the
// provider on every call of its answer: the first, the continuation of a
// cut, and the takeover after its worker was SIGKILLed.
func TestRequestIDsReachTheProvider(t *testing.T) {
	const tokens = 60
	s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}, Edges: 1, Workers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	msgs, want := prompt("[[mock: cut_after=5]] request ids: every call names the client's request", tokens)
	const id = "support-ticket-4711"
	c, err := postStream(ctx, s.edgeProcs[0].URL, msgs, want, http.Header{"X-Request-Id": {id}})
	must(t, err)
	defer c.close()
	must(t, c.readN(15)) // past the cut and its continuation
	owner := s.owner(c.id, 1, 5*time.Second).Frame.Worker
	must(t, s.worker(owner).Kill())
	must(t, c.finish(ctx, func() string { return s.edgeProcs[0].URL }, nil))
	must(t, c.check())
	got := s.mockStats().RequestIDs[mockupstream.ConversationKey(msgs)]
	if len(got) != 3 || slices.ContainsFunc(got, func(v string) bool { return v != id }) {
		t.Fatalf("the provider saw X-Request-Id %q; want %q on each of the three calls (first, continuation, takeover)", got, id)
	}
}
