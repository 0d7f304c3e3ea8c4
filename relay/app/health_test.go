package app_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/app"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/natsserver"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
)

// Each role's listener (the edge's API and its ops listener, the worker's
// and the coordinator's ops listener) answers /healthz while NATS cannot be
// reached, and /readyz with a 503 and Retry-After, until NATS is there
// with the streams: then the role is ready and /readyz says so.
func TestHealthzAnswersWhileNATSIsUnreachable(t *testing.T) {
	for _, role := range []config.Role{config.RoleEdge, config.RoleWorker, config.RoleCoordinator} {
		t.Run(string(role), func(t *testing.T) {
			natsAddr, listen := freeAddr(t), freeAddr(t)
			cfg := config.Config{
				NATS:      natsconn.Config{URL: "nats://" + natsAddr},
				Streams:   streams.Topology{MemoryStorage: true},
				Providers: []provider.Config{{Name: "p", BaseURL: "http://127.0.0.1:9/v1", Models: []string{"m"}}},
			}
			cfg.Edge.Listen, cfg.Worker.Listen, cfg.Coordinator.Listen = listen, listen, listen
			bases := []string{"http://" + listen}
			if role == config.RoleEdge {
				ops := freeAddr(t)
				cfg.Edge.OpsListen = ops
				bases = append(bases, "http://"+ops)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ready := make(chan app.Addrs, 1)
			done := make(chan error, 1)
			go func() {
				done <- app.Run(ctx, role, cfg, relaytest.Logger(t), func(a app.Addrs) { ready <- a })
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
			defer client.CloseIdleConnections()
			for _, base := range bases {
				relaytest.Eventually(t, 10*time.Second, 20*time.Millisecond, func() bool {
					status, _, _ := fetch(client, base+"/healthz")
					return status == http.StatusOK
				})
				status, retry, body := fetch(client, base+"/readyz")
				if status != http.StatusServiceUnavailable || retry == "" {
					t.Errorf("%s/readyz without NATS: %d, Retry-After %q: %s", base, status, retry, body)
				}
			}
			select {
			case <-ready:
				t.Fatal("ready without NATS")
			default:
			}

			srv, err := natsserver.Start(natsserver.Config{Listen: natsAddr, StoreDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { // after the role stopped
				srv.Shutdown()
				srv.WaitForShutdown()
			})
			select {
			case <-ready:
			case err := <-done:
				t.Fatalf("Run: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("not ready within 30s of NATS starting")
			}
			for _, base := range bases {
				relaytest.Eventually(t, 10*time.Second, 20*time.Millisecond, func() bool {
					status, _, _ := fetch(client, base+"/readyz")
					return status == http.StatusOK
				})
				if status, _, body := fetch(client, base+"/healthz"); status != http.StatusOK {
					t.Errorf("%s/healthz once ready: %d %s", base, status, body)
				}
			}
		})
	}
}

// fetch GETs url; status 0 when it could not.
func fetch(client *http.Client, url string) (status int, retryAfter, body string) {
	res, err := client.Get(url)
	if err != nil {
		return 0, "", err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Retry-After"), string(b)
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
