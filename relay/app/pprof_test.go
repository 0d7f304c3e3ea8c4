package app_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/app"
	"github.com/relaydev/relay/relay/config"
)

// runMockUpstream runs the mock-upstream role (the one that needs no NATS)
// with the --set flags given, as the relay binary does, and returns its
// addresses and a stop function that ends it and returns what it logged
// (called again at the end of the test, it only returns the log).
func runMockUpstream(t *testing.T, set ...string) (app.Addrs, func() string) {
	t.Helper()
	cfg, err := config.Load(config.Sources{Set: append(set, "mock_upstream.listen=127.0.0.1:0")}, config.RoleMockUpstream)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer // read once Run returned, so never written at the same time
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan app.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, config.RoleMockUpstream, cfg, slog.New(slog.NewTextHandler(&logs, nil)), func(a app.Addrs) { ready <- a })
	}()
	stop := sync.OnceValue(func() string {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the role did not stop within 10s")
		}
		return logs.String()
	})
	select {
	case a := <-ready:
		t.Cleanup(func() { stop() })
		return a, stop
	case err := <-done:
		cancel()
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		stop()
		t.Fatal("mock-upstream not ready within 10s")
	}
	return app.Addrs{}, nil
}

func get(t *testing.T, client *http.Client, url string) []byte {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body
}

// With pprof_listen set, a role serves the goroutine dump and a CPU
// profile on it, logs the address it got for port 0, and stops serving
// when the role stops.
func TestPprofServesProfilesUntilTheRoleStops(t *testing.T) {
	a, stop := runMockUpstream(t, "pprof_listen=127.0.0.1:0")
	if a.Pprof == "" || strings.HasSuffix(a.Pprof, ":0") {
		t.Fatalf("Addrs.Pprof = %q, want the port the listener got", a.Pprof)
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	base := "http://" + a.Pprof + "/debug/pprof/"

	if dump := get(t, client, base+"goroutine?debug=1"); !bytes.Contains(dump, []byte("goroutine profile: total")) {
		t.Errorf("goroutine?debug=1 is not a goroutine dump:\n%.500s", dump)
	}
	profile := get(t, client, base+"profile?seconds=1")
	zr, err := gzip.NewReader(bytes.NewReader(profile))
	if err != nil {
		t.Fatalf("profile?seconds=1 is not gzip (%d bytes): %v", len(profile), err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil || len(raw) == 0 {
		t.Fatalf("profile?seconds=1 unzips to %d bytes: %v", len(raw), err)
	}
	if index := get(t, client, base); !bytes.Contains(index, []byte("heap")) {
		t.Errorf("the index does not list the heap profile:\n%.500s", index)
	}

	client.CloseIdleConnections()
	logs := stop()
	if want := `msg="pprof listening" addr=` + a.Pprof; !strings.Contains(logs, want) {
		t.Errorf("the log lacks %q:\n%s", want, logs)
	}
	if conn, err := net.Dial("tcp", a.Pprof); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after the role stopped", a.Pprof)
	}
}

// Without pprof_listen nothing serves profiles: no address, no log line,
// and the role's own listener does not serve /debug/pprof/ (the handlers
// that importing net/http/pprof puts on http.DefaultServeMux are not
// reachable).
func TestPprofIsOffByDefault(t *testing.T) {
	a, stop := runMockUpstream(t)
	if a.Pprof != "" {
		t.Errorf("Addrs.Pprof = %q with pprof_listen empty, want none", a.Pprof)
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + a.MockUpstream + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the mock upstream answers /debug/pprof/ with %s, want 404", resp.Status)
	}
	client.CloseIdleConnections()
	if logs := stop(); strings.Contains(logs, "pprof") {
		t.Errorf("the log mentions pprof with pprof_listen empty:\n%s", logs)
	}
}
