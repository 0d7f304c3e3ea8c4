// Package relaytest is the one harness every test that needs NATS uses: a
// real embedded nats-server with JetStream, the relay's streams set up, and
// an eventually helper instead of sleeps.
package relaytest

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/natsserver"
	"github.com/relaydev/relay/relay/streams"
)

// NATS starts an embedded server with file storage under t.TempDir() and
// shuts it down when the test ends.
func NATS(t testing.TB) *server.Server {
	t.Helper()
	s, err := natsserver.Start(natsserver.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// Connect connects to s, sets up the relay's streams with top, and closes
// the connection when the test ends.
func Connect(t testing.TB, s *server.Server, top streams.Topology) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, js, err := natsconn.Connect(natsconn.Config{URL: s.ClientURL()}, t.Name(), Logger(t))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	setUp(t, func(ctx context.Context) error { return streams.Setup(ctx, js, top) })
	return nc, js
}

// setUp runs setup until it succeeds, for up to 20 s, as the roles retry
// theirs (relay/app): a cluster that just formed may still refuse to
// place a replicated stream ("no suitable peers for placement, peer
// offline") until its leader has heard every peer's JetStream stats, which
// a loaded machine delays.
func setUp(t testing.TB, setup func(context.Context) error) {
	t.Helper()
	var err error
	Eventually(t, 20*time.Second, 100*time.Millisecond, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err = setup(ctx); err != nil {
			t.Logf("setup: %v (retrying)", err)
		}
		return err == nil
	})
}

// Logger logs through t, so a failing test shows what the roles did. Lines
// logged after the test ended (by a goroutine still winding down) are
// dropped instead of panicking.
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// Eventually fails the test unless cond returns true within wait, checking
// every tick.
func Eventually(t testing.TB, wait, tick time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", wait)
		}
		time.Sleep(tick)
	}
}
