package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/wire"
)

// kvKey is a key of a bucket: "$KV.<bucket>.<key>" is the subject a write
// to it publishes on.
type kvKey struct{ bucket, key string }

func (k kvKey) subject() string { return "$KV." + k.bucket + "." + k.key }

// Shared state is written only by the role that owns each key
// (wire/state.go): with the shipped NATS users, every write of a key a
// role does not own is refused, while the edge, the worker and the
// coordinator, each with its own user, serve a request and may write the
// keys they own. An edge whose user could write an open breaker, a pause
// or the lease could refuse every client or stop the coordinator.
func TestNATSPermissionsSharedStateOwnedKeys(t *testing.T) {
	sys := start(t, options{Secured: true, Mock: mockupstream.Config{Tokens: 5}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if status, _, body, err := unary(ctx, sys.Edge, "mock-1", "Owned keys, please."); err != nil || status != http.StatusOK {
		t.Fatalf("request under the role users: status %d, err %v: %s", status, err, body)
	}

	var (
		breaker     = kvKey{wire.BreakerBucket, wire.ScopeKey("mock", "")}
		modelBrk    = kvKey{wire.BreakerBucket, wire.ScopeKey("mock", "mock-1")}
		pause       = kvKey{wire.PauseBucket, wire.ScopeKey("mock", "")}
		edgeDemand  = kvKey{wire.QuotaBucket, fleet.DemandKey("edge", "edge-probe")}
		workDemand  = kvKey{wire.QuotaBucket, fleet.DemandKey("worker", "worker-probe")}
		share       = kvKey{wire.QuotaBucket, fleet.ShareKey("edge-probe")}
		limits      = kvKey{wire.QuotaBucket, fleet.LimitsKey}
		ttft        = kvKey{wire.QuotaBucket, fleet.TTFTKey}
		canary      = kvKey{wire.CanaryBucket, wire.KeyToken("mock-1")}
		lease       = kvKey{wire.LeaseBucket, wire.CoordinatorLeaseKey}
		health      = kvKey{wire.HealthBucket, wire.KeyToken("mock")}
		meta        = kvKey{wire.MetaBucket, wire.NewStreamID()}
		idempotency = kvKey{wire.IdempotencyBucket, "probe"}
		handover    = kvKey{wire.HandoverBucket, "probe"}
		answer      = kvKey{wire.AnswerBucket, "probe"}
		usage       = kvKey{wire.UsageBucket, "usage.2026-12.acme.k.probe"}
		hold        = kvKey{wire.UsageBucket, "hold.probe"}
	)
	for _, c := range []struct {
		role      string
		forbidden []kvKey
		// owned are written with a delete marker on a key no node uses;
		// the lease, health, shares and demand the roles write themselves
		// are proven by the request above (start fails the test on any
		// violation the roles hit).
		owned []kvKey
	}{
		{
			role:      "edge",
			forbidden: []kvKey{breaker, modelBrk, pause, workDemand, share, limits, ttft, canary, lease, health, handover, answer, usage},
			owned:     []kvKey{meta, idempotency, {wire.QuotaBucket, fleet.DemandKey("edge", "edge-unused")}, hold},
		},
		{
			role:      "worker",
			forbidden: []kvKey{lease, meta, idempotency, edgeDemand, share, limits, ttft, canary, health, hold},
			owned: []kvKey{
				{wire.BreakerBucket, wire.ScopeKey("unused", "")}, {wire.PauseBucket, wire.ScopeKey("unused", "m")},
				{wire.QuotaBucket, fleet.DemandKey("worker", "worker-unused")}, handover, answer,
			},
		},
		{
			role:      "coordinator",
			forbidden: []kvKey{pause, meta, idempotency, edgeDemand, workDemand, {wire.LeaseBucket, "other"}, answer},
			owned: []kvKey{
				{wire.BreakerBucket, wire.ScopeKey("unused", "")}, {wire.HealthBucket, "unused"},
				{wire.QuotaBucket, fleet.ShareKey("unused")}, ttft, {wire.CanaryBucket, "unused"}, handover,
			},
		},
	} {
		t.Run(c.role, func(t *testing.T) {
			p := sys.Secured.probe(t, c.role)
			for _, k := range c.owned {
				p.allowKVDelete(k.bucket, k.key)
			}
			for _, k := range c.forbidden {
				p.denyPublish(k.subject())
			}
			if c.role == "worker" {
				// Who holds the lease is none of a worker's business.
				p.denyPublish("$JS.API.DIRECT.GET.KV_" + lease.bucket + "." + lease.subject())
			}
			// Through JetStream too: a refused KV write is never stored.
			p.jsPublishFails(c.forbidden[0].subject(), []byte(`{"forged":true}`))
		})
	}

	// The edge still refuses nothing for want of state: the breaker it
	// could not write is not open, and the lease is the coordinator's.
	if status, _, body, err := unary(ctx, sys.Edge, "mock-1", "Still served."); err != nil || status != http.StatusOK {
		t.Fatalf("request after the refused writes: status %d, err %v: %s", status, err, body)
	}
	st := relayStatus(t, ctx, sys.Edge)
	if st.Coordinator.Holder == "" {
		t.Fatalf("no coordinator holds the lease: %+v", st.Coordinator)
	}
}

// Every role asks for its replies on its own inbox prefix and may
// subscribe to nothing else: the coordinator's user cannot read the
// request a worker pulls (a tenant's prompt) through the worker's inbox,
// nor an edge's replies, while the roles serve the request with theirs.
func TestNATSPermissionsInboxPerRole(t *testing.T) {
	sys := start(t, options{Secured: true, Mock: mockupstream.Config{Tokens: 5}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	p := sys.Secured.probe(t, "coordinator")
	eavesdrop, err := p.nc.SubscribeSync("_INBOX.>")
	must(t, err)
	defer eavesdrop.Unsubscribe()
	must(t, p.nc.Flush())

	const secret = "the tenant's secret prompt 7f3a"
	if status, _, body, err := unary(ctx, sys.Edge, "mock-1", secret); err != nil || status != http.StatusOK {
		t.Fatalf("request under the role users: status %d, err %v: %s", status, err, body)
	}
	for {
		m, err := eavesdrop.NextMsg(100 * time.Millisecond)
		if err != nil {
			break
		}
		if bytes.Contains(m.Data, []byte(secret)) {
			t.Fatalf("the coordinator's user read the prompt through _INBOX.> (a delivery of %s)", m.Subject)
		}
	}
	p.expectViolation(`Subscription to "_INBOX.>"`)
	for _, inbox := range []string{"_INBOX.worker.>", "_INBOX.edge.>", "_INBOX.*.*"} {
		p.denySubscribe(inbox)
	}
	p.allowSubscribe("_INBOX.coordinator.>")
	// Its own JetStream requests are answered on its prefix.
	p.lastSeqs(wire.RequestStream)

	w := sys.Secured.probe(t, "worker")
	w.denySubscribe("_INBOX.edge.>")
	w.denySubscribe("_INBOX.coordinator.>")
	w.allowSubscribe("_INBOX.worker.>")
}

// GET /v1/relay/status reads every shared bucket (fleet.ReadStatus): under
// the shipped NATS users the edge's user may read and watch each, so the
// status answers at once, whole, instead of a 503 after its timeout.
func TestNATSPermissionsRelayStatus(t *testing.T) {
	sys := start(t, options{Secured: true, Mock: mockupstream.Config{Tokens: 5}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if status, _, body, err := unary(ctx, sys.Edge, "mock-1", "Status, please."); err != nil || status != http.StatusOK {
		t.Fatalf("request under the role users: status %d, err %v: %s", status, err, body)
	}
	began := time.Now()
	st := relayStatus(t, ctx, sys.Edge)
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("status took %v: a read waited for a refused request", took)
	}
	if len(st.Errors) > 0 {
		t.Fatalf("status could not read everything: %s", strings.Join(st.Errors, "; "))
	}
}

// relayStatus gets GET /v1/relay/status and requires a 200.
func relayStatus(t *testing.T, ctx context.Context, edge string) fleet.Status {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, edge+"/v1/relay/status", nil)
	must(t, err)
	resp, err := httpClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/relay/status: %s", resp.Status)
	}
	var st fleet.Status
	must(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}
