package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/natsperm"
	"github.com/relaydev/relay/relay/natsserver"
)

// natsServerConfig is the shipped nats-server configuration the security
// tests run with, unchanged but for the port and the store directory; it
// includes accounts.conf beside it.
var natsServerConfig = filepath.Join("..", "configs", "nats", "nats-server.conf")

// securedNodes are the nodes of each role that get an nkey identity of
// their own (natsperm.Generate): the roles a test starts take them in
// turn (creds), and probeNode connects as any.
var securedNodes = natsperm.Nodes{
	natsperm.Edge:        {"edge-1", "edge-2", "edge-3"},
	natsperm.Worker:      {"worker-1", "worker-2", "worker-3"},
	natsperm.Coordinator: {"coordinator-1", "coordinator-2"},
}

// securedNATS is a nats-server running natsServerConfig whose account has
// the shipped accounts.conf's users, one per role with a fresh password,
// and beside them a user per node of securedNodes, each with its nkey seed
// in dir.
type securedNATS struct {
	srv      *server.Server
	dir      string
	password map[string]string // by user (role) name

	mu    sync.Mutex
	taken map[string]int // nodes handed out by creds, by role
}

// startSecuredNATS runs natsServerConfig on a free port. The passwords
// reach accounts.conf through its $RELAY_NATS_<ROLE>_PASSWORD variables,
// so the test must not run in parallel with others.
func startSecuredNATS(t *testing.T) *securedNATS {
	t.Helper()
	s := &securedNATS{dir: t.TempDir(), password: map[string]string{}, taken: map[string]int{}}
	for _, role := range natsperm.Roles {
		var b [16]byte
		rand.Read(b[:])
		s.password[string(role)] = hex.EncodeToString(b[:])
		t.Setenv(strings.TrimPrefix(natsperm.PasswordVar(role), "$"), s.password[string(role)])
	}
	shipped, err := os.ReadFile(filepath.Join(filepath.Dir(natsServerConfig), natsperm.AccountsFile))
	must(t, err)
	var want bytes.Buffer
	must(t, natsperm.RenderPasswords(&want, natsperm.Options{}))
	if !bytes.Equal(shipped, want.Bytes()) {
		t.Fatalf("configs/nats/%s is not what `relay nats users --passwords` writes", natsperm.AccountsFile)
	}
	nodes, err := natsperm.Generate(s.dir, securedNodes, natsperm.Options{}, rand.Reader)
	must(t, err)
	var accounts bytes.Buffer
	must(t, natsperm.Render(&accounts, "test users", append(natsperm.PasswordUsers(), nodes...), natsperm.Options{}))
	must(t, os.WriteFile(filepath.Join(s.dir, natsperm.AccountsFile), accounts.Bytes(), 0o600))
	conf, err := os.ReadFile(natsServerConfig)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(s.dir, "nats-server.conf"), conf, 0o600))
	srv, err := natsserver.StartFile(filepath.Join(s.dir, "nats-server.conf"), natsserver.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	s.srv = srv
	return s
}

// creds is the connection config of the next node of role that has not
// run yet, with its own nkey seed, as a node started from `relay nats
// users` runs (nats.nkey_seed_file, nats.node).
func (s *securedNATS) creds(role string) natsconn.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := securedNodes[natsperm.Role(role)]
	node := names[s.taken[role]%len(names)]
	s.taken[role]++
	return s.nodeCreds(role, node)
}

// nodeCreds is the connection config of role's node.
func (s *securedNATS) nodeCreds(role, node string) natsconn.Config {
	return natsconn.Config{URL: s.srv.ClientURL(), Node: node, NKeySeed: filepath.Join(s.dir, natsperm.SeedFile(natsperm.Role(role), node))}.ForRole(role)
}

// setupCreds is the connection config of the setup identity.
func (s *securedNATS) setupCreds() natsconn.Config {
	return natsconn.Config{URL: s.srv.ClientURL(), NKeySeed: filepath.Join(s.dir, natsperm.SeedFile(natsperm.Setup, ""))}
}

// roleCreds is the connection config of role's password user, the one
// all its nodes share in the shipped accounts.conf.
func (s *securedNATS) roleCreds(role string) natsconn.Config {
	return natsconn.Config{URL: s.srv.ClientURL(), User: role, Password: s.password[role]}.ForRole(role)
}

// violationLog records the log lines that report a NATS permissions
// violation, so a test can assert that the roles never hit one.
type violationLog struct {
	mu    sync.Mutex
	lines []string
}

func (v *violationLog) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "Permissions Violation") {
		v.mu.Lock()
		v.lines = append(v.lines, strings.TrimSpace(string(p)))
		v.mu.Unlock()
	}
	return len(p), nil
}

func (v *violationLog) Lines() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.lines...)
}

// failOnViolations returns logger, which also hands its lines to a
// violationLog, and fails the test at its end if a role was refused an
// operation. Called before the roles start, its check runs after they
// stopped and sees every line.
func failOnViolations(t *testing.T, logger *slog.Logger) *slog.Logger {
	v := &violationLog{}
	t.Cleanup(func() {
		if lines := v.Lines(); len(lines) > 0 {
			t.Errorf("roles were refused operations they need:\n%s", strings.Join(lines, "\n"))
		}
	})
	return slog.New(slog.NewMultiHandler(logger.Handler(), slog.NewTextHandler(v, nil)))
}

// natsProbe is a bare connection as one role's user, which reports the
// server's permissions violations to the test.
type natsProbe struct {
	t    *testing.T
	user string
	nc   *nats.Conn
	js   jetstream.JetStream
	errs chan error
}

// probe connects as role's password user.
func (s *securedNATS) probe(t *testing.T, role string) *natsProbe {
	t.Helper()
	return s.probeAs(t, role, s.roleCreds(role))
}

// probeNode connects as role's node, with its nkey.
func (s *securedNATS) probeNode(t *testing.T, role, node string) *natsProbe {
	t.Helper()
	return s.probeAs(t, role+" "+node, s.nodeCreds(role, node))
}

func (s *securedNATS) probeAs(t *testing.T, who string, creds natsconn.Config) *natsProbe {
	t.Helper()
	p := &natsProbe{t: t, user: who, errs: make(chan error, 64)}
	opts := []nats.Option{nats.CustomInboxPrefix(creds.InboxPrefix),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case p.errs <- err:
			default:
			}
		})}
	if creds.NKeySeed != "" {
		o, err := nats.NkeyOptionFromSeed(creds.NKeySeed)
		must(t, err)
		opts = append(opts, o)
	} else {
		opts = append(opts, nats.UserInfo(creds.User, creds.Password))
	}
	nc, err := nats.Connect(creds.URL, opts...)
	if err != nil {
		t.Fatalf("connect as %s: %v", who, err)
	}
	t.Cleanup(nc.Close)
	if p.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	p.nc = nc
	return p
}

// allowPublish and allowSubscribe use a subject that must be allowed; a
// violation they cause fails the next deny check, which sees it first.
func (p *natsProbe) allowPublish(subject string) {
	p.t.Helper()
	must(p.t, p.nc.Publish(subject, []byte("probe")))
}

func (p *natsProbe) allowSubscribe(subject string) {
	p.t.Helper()
	sub, err := p.nc.SubscribeSync(subject)
	must(p.t, err)
	p.t.Cleanup(func() { sub.Unsubscribe() })
}

// denyPublish publishes on subject and waits for the server to refuse it.
func (p *natsProbe) denyPublish(subject string) {
	p.t.Helper()
	must(p.t, p.nc.Publish(subject, []byte("probe")))
	p.expectViolation(fmt.Sprintf("Publish to %q", subject))
}

// denySubscribe subscribes to subject and waits for the server to refuse it.
func (p *natsProbe) denySubscribe(subject string) {
	p.t.Helper()
	sub, err := p.nc.SubscribeSync(subject)
	must(p.t, err)
	defer sub.Unsubscribe()
	p.expectViolation(fmt.Sprintf("Subscription to %q", subject))
}

// expectViolation waits for the violation that names what. Violations
// arrive in order, so any other one came from an operation before it that
// should have been allowed.
func (p *natsProbe) expectViolation(what string) {
	p.t.Helper()
	must(p.t, p.nc.Flush())
	timeout := time.After(5 * time.Second)
	for {
		select {
		case err := <-p.errs:
			switch {
			case !errors.Is(err, nats.ErrPermissionViolation):
				p.t.Logf("%s: async error: %v", p.user, err)
			case strings.Contains(err.Error(), what):
				return
			default:
				p.t.Fatalf("%s: refused an operation the role needs: %v", p.user, err)
			}
		case <-timeout:
			p.t.Fatalf("%s: the server allowed it: no permissions violation for %s", p.user, what)
		}
	}
}

// allowKVDelete writes a delete marker on key of bucket through JetStream
// and requires the server to store it: a write the role is allowed that
// changes no value (a marker on a key nobody uses reads as absent).
func (p *natsProbe) allowKVDelete(bucket, key string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := p.js.KeyValue(ctx, bucket)
	if err != nil {
		p.t.Fatalf("%s: bucket %s: %v", p.user, bucket, err)
	}
	if err := kv.Delete(ctx, key); err != nil {
		p.t.Fatalf("%s: may not write key %s of %s: %v", p.user, key, bucket, err)
	}
}

// jsPublishFails publishes to JetStream and requires that no ack comes.
func (p *natsProbe) jsPublishFails(subject string, data []byte) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 750*time.Millisecond)
	defer cancel()
	if ack, err := p.js.Publish(ctx, subject, data); err == nil {
		p.t.Fatalf("%s: JetStream stored a message on %s at sequence %d", p.user, subject, ack.Sequence)
	}
	p.expectViolation(fmt.Sprintf("Publish to %q", subject))
}

// lastSeqs returns the last sequence of each of the relay's streams.
func (p *natsProbe) lastSeqs(names ...string) map[string]uint64 {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[string]uint64{}
	for _, name := range names {
		st, err := p.js.Stream(ctx, name)
		if err != nil {
			p.t.Fatalf("%s: stream %s: %v", p.user, name, err)
		}
		out[name] = st.CachedInfo().State.LastSeq
	}
	return out
}
