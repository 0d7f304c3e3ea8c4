package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/natsperm"
	"github.com/relaydev/relay/relay/wire"
)

// With a NATS identity per node (`relay nats users`), a node may write
// only its own keys and read only its own replies: an edge cannot
// overwrite another edge's quota demand (which skews how the
// coordinator splits the tenants' limits) nor subscribe to another edge's
// inbox, and likewise for workers; each running node reports its demand
// under its own name.
func TestNATSNodeIdentitiesOwnKeysAndInboxes(t *testing.T) {
	sys := start(t, options{Secured: true, Mock: mockupstream.Config{Tokens: 5}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if status, _, body, err := unary(ctx, sys.Edge, "mock-1", "Per node, please."); err != nil || status != http.StatusOK {
		t.Fatalf("request under the node identities: status %d, err %v: %s", status, err, body)
	}
	// The running edge and worker (edge-1, worker-1) report their demand
	// under their own names, the keys their users may write.
	watcher := sys.Secured.probe(t, "coordinator")
	quotas, err := watcher.js.KeyValue(ctx, wire.QuotaBucket)
	must(t, err)
	for _, key := range []string{fleet.DemandKey("edge", "edge-1"), fleet.DemandKey("worker", "worker-1")} {
		for {
			if _, err := quotas.Get(ctx, key); err == nil {
				break
			} else if ctx.Err() != nil {
				t.Fatalf("no demand report under %s: %v", key, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	for _, c := range []struct{ role, self, other string }{{"edge", "edge-2", "edge-1"}, {"worker", "worker-2", "worker-1"}} {
		t.Run(c.role, func(t *testing.T) {
			p := sys.Secured.probeNode(t, c.role, c.self)
			p.allowKVDelete(wire.QuotaBucket, fleet.DemandKey(c.role, c.self))
			p.denyPublish("$KV." + wire.QuotaBucket + "." + fleet.DemandKey(c.role, c.other))
			p.jsPublishFails("$KV."+wire.QuotaBucket+"."+fleet.DemandKey(c.role, c.other), []byte(`{"forged":true}`))
			p.allowSubscribe(natsperm.InboxPrefix(c.role, c.self) + ".>")
			p.denySubscribe(natsperm.InboxPrefix(c.role, c.other) + ".>")
			p.denySubscribe("_INBOX." + c.role + ".>")
		})
	}
}

// The coordinator's running user may not change any stream: adding a
// republish of the request queue to a subject it may read (relay.liveness)
// is refused, and so is every other way tried to have prompts copied where
// it can read them (sourcing the queue into a bucket it reads, a consumer
// of its own on the queue); none of them lets a prompt reach it. relay
// setup (the setup identity) made the assets.
func TestNATSCoordinatorCannotReconfigureStreams(t *testing.T) {
	sys := start(t, options{Secured: true, Mock: mockupstream.Config{Tokens: 5}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const secret = "the tenant's secret prompt 51c9"
	for _, p := range []*natsProbe{sys.Secured.probe(t, "coordinator"), sys.Secured.probeNode(t, "coordinator", "coordinator-2")} {
		heard, err := p.nc.SubscribeSync(wire.LivenessSubject)
		must(t, err)
		defer heard.Unsubscribe()

		req, err := p.js.Stream(ctx, wire.RequestStream)
		must(t, err)
		cfg := req.CachedInfo().Config
		cfg.RePublish = &jetstream.RePublish{Source: wire.RequestSubject, Destination: wire.LivenessSubject}
		p.jsRefused(func(ctx context.Context) error { _, err := p.js.UpdateStream(ctx, cfg); return err },
			"$JS.API.STREAM.UPDATE."+wire.RequestStream)

		leases, err := p.js.Stream(ctx, "KV_"+wire.LeaseBucket)
		must(t, err)
		lcfg := leases.CachedInfo().Config
		lcfg.Sources = []*jetstream.StreamSource{{Name: wire.RequestStream}}
		p.jsRefused(func(ctx context.Context) error { _, err := p.js.UpdateStream(ctx, lcfg); return err },
			"$JS.API.STREAM.UPDATE.KV_"+wire.LeaseBucket)
		p.jsRefused(func(ctx context.Context) error {
			_, err := p.js.CreateStream(ctx, jetstream.StreamConfig{Name: "KV_relay_snoop", Sources: []*jetstream.StreamSource{{Name: wire.RequestStream}}})
			return err
		}, "$JS.API.STREAM.CREATE.KV_relay_snoop")
		p.jsRefused(func(ctx context.Context) error {
			_, err := p.js.CreateOrUpdateConsumer(ctx, wire.RequestStream, jetstream.ConsumerConfig{Durable: "snoop", AckPolicy: jetstream.AckNonePolicy})
			return err
		}, "$JS.API.CONSUMER.CREATE."+wire.RequestStream+".snoop")
		p.denyPublish("$JS.API.CONSUMER.CREATE." + wire.RequestStream + "." + wire.WorkerConsumer)
		p.denyPublish("$JS.API.STREAM.MSG.GET." + wire.RequestStream)

		if status, _, body, err := unary(ctx, sys.Edge, "mock-1", secret); err != nil || status != http.StatusOK {
			t.Fatalf("request: status %d, err %v: %s", status, err, body)
		}
		for {
			m, err := heard.NextMsg(100 * time.Millisecond)
			if err != nil {
				break
			}
			if bytes.Contains(m.Data, []byte(secret)) {
				t.Fatalf("%s read the prompt on %s", p.user, m.Subject)
			}
		}
		info, err := req.Info(ctx)
		must(t, err)
		if info.Config.RePublish != nil {
			t.Fatalf("%s has a republish: %+v", wire.RequestStream, info.Config.RePublish)
		}
	}
}

// jsRefused runs a JetStream API call the role's user must not make and
// requires that it fails and that the server refused subject.
func (p *natsProbe) jsRefused(call func(context.Context) error, subject string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 750*time.Millisecond)
	defer cancel()
	if err := call(ctx); err == nil {
		p.t.Fatalf("%s: the server took the call on %s", p.user, subject)
	}
	p.expectViolation(`Publish to "` + subject + `"`)
}

// The way configs/nats/README.md says to run a secured relay, with real
// processes: `relay nats users` gives every node an nkey, nats-server runs
// with the account it wrote, `relay setup` with the setup identity creates
// the streams, consumer and buckets and exits, and then a coordinator, a
// worker and an edge, each started with its own seed file and node name,
// stream an answer, none of them refused anything.
func TestNATSSetupThenNodesStreamAnAnswer(t *testing.T) {
	bin := processBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h, err := procs.New(ctx, procs.Options{Dir: t.TempDir(), Binaries: bin, Logf: t.Logf, StopTimeout: 5 * time.Second})
	must(t, err)
	defer h.Close()

	dir := t.TempDir()
	relay := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin.Relay, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("relay %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	relay("nats", "users", "--edges", "edge-1", "--workers", "worker-1", "--coordinators", "coordinator-1", "--out", dir)
	for _, f := range []string{natsperm.SeedFile(natsperm.Edge, "edge-1"), natsperm.SeedFile(natsperm.Setup, "")} {
		st, err := os.Stat(filepath.Join(dir, f))
		must(t, err)
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	accounts, err := os.ReadFile(filepath.Join(dir, natsperm.AccountsFile))
	must(t, err)
	n, err := h.StartNATS(ctx, procs.NATSOptions{Extra: string(accounts)})
	must(t, err)
	url := strings.Join(n.URLs(), ",")

	// Without credentials the server refuses the connection: only the
	// generated users get in.
	if nc, err := nats.Connect(url, nats.Timeout(time.Second)); err == nil {
		nc.Close()
		t.Fatal("the server accepted a connection without credentials")
	}
	out := relay("setup", "--set", "nats.url="+url, "--set", "nats.nkey_seed_file="+filepath.Join(dir, natsperm.SeedFile(natsperm.Setup, "")))
	if !strings.Contains(out, "relay setup done") {
		t.Fatalf("relay setup said:\n%s", out)
	}

	mock, err := h.Start(ctx, procs.Role{Role: procs.MockUpstream, Settings: procs.Settings{"mock_upstream.tokens": 20, "mock_upstream.token_interval": "2ms"}})
	must(t, err)
	providers := []procs.Provider{mock.Provider("mock", "mock-1")}
	node := func(role, name string) procs.Settings {
		return procs.Settings{"nats.node": name, "nats.nkey_seed_file": filepath.Join(dir, natsperm.SeedFile(natsperm.Role(role), name))}
	}
	var started []*procs.Process
	for _, r := range []struct{ role, name string }{{procs.Coordinator, "coordinator-1"}, {procs.Worker, "worker-1"}, {procs.Edge, "edge-1"}} {
		p, err := h.Start(ctx, procs.Role{Role: r.role, Name: r.name, NATS: n.URLs(), Providers: providers, Settings: node(r.role, r.name)})
		must(t, err)
		started = append(started, p)
	}
	edge := started[2]
	msgs, want := prompt("Set up apart, streamed by nodes.", 20)
	c, err := postStream(ctx, edge.URL, msgs, want, nil)
	must(t, err)
	defer c.close()
	must(t, c.finish(ctx, func() string { return edge.URL }, nil))
	must(t, c.check())
	for _, p := range started {
		log, err := p.Log()
		must(t, err)
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, "Permissions Violation") {
				t.Errorf("%s was refused an operation it needs: %s", p.Name, line)
			}
		}
	}
}
