package natsconn_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/natsserver"
	"github.com/relaydev/relay/relay/relaytest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A role that cannot reach NATS says so, with the URL and the dial error,
// again and again while it cannot (every unreachableEvery, shortened
// here), and says when it connected.
func TestUnreachableNATSIsLoggedUntilItConnects(t *testing.T) {
	natsconn.SetUnreachableEvery(t, 100*time.Millisecond)
	addr := freeAddr(t)
	logs := &records{}
	nc, _, err := natsconn.Connect(natsconn.Config{URL: "nats://u:secret@" + addr}, "test", slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	relaytest.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool { return len(logs.with("nats unreachable")) >= 3 })
	for _, r := range logs.with("nats unreachable") {
		if r["url"] != "nats://u:xxxxx@"+addr || !strings.Contains(r["err"], "connection refused") || r["level"] != "WARN" {
			t.Errorf("line %v, want the redacted URL and the dial error", r)
		}
	}

	srv, err := natsserver.Start(natsserver.Config{Listen: addr, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
	}()
	relaytest.Eventually(t, 20*time.Second, 20*time.Millisecond, func() bool { return len(logs.with("nats connected")) == 1 })
	if !nc.IsConnected() {
		t.Fatal("logged connected, but is not")
	}
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// records is a slog.Handler that keeps each record's message, level and
// attributes as strings.
type records struct {
	mu   sync.Mutex
	seen []map[string]string
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *records) WithGroup(string) slog.Handler            { return h }

func (h *records) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message, "level": r.Level.String()}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, m)
	return nil
}

// with is the records whose message starts with msg.
func (h *records) with(msg string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, m := range h.seen {
		if strings.HasPrefix(m["msg"], msg) {
			out = append(out, m)
		}
	}
	return out
}
