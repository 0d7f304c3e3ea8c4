package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
)

// TestFrontDoorLockoutOneTenantCannotHoldEveryConnection: at the edge's
// connection cap, acme's streams, most of them waiting for their turn at
// the one worker slot, hold acme's share of the connections only: acme's
// requests past it are refused with 429 too_many_connections, and beta's
// request is served, as is /healthz on the edge's ops listener.
func TestFrontDoorLockoutOneTenantCannotHoldEveryConnection(t *testing.T) {
	ops := freeLoopbackAddr(t)
	sys := start(t, options{Mock: mockupstream.Config{Tokens: 100, TokenInterval: 50 * time.Millisecond}, Tune: withTenants(func(c *config.Config) {
		c.Edge.MaxConnections = 8
		c.Edge.OpsListen = ops
		c.Worker.MaxInflight = 1
	})})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Each request on a connection of its own, as many as the cap.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	body, _ := json.Marshal(map[string]any{"model": "mock-1", "stream": true,
		"messages": []map[string]string{{"role": "user", "content": "Hold a connection."}}})

	var mu sync.Mutex
	statuses := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", sys.Edges[0]+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+keyAcme)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return // closed as unauthenticated past its share, or at the end of the test
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			var e apiError
			code := ""
			if json.Unmarshal(b, &e) == nil && e.Error.Code != nil {
				code = *e.Error.Code
			}
			mu.Lock()
			statuses[http.StatusText(resp.StatusCode)+" "+code]++
			mu.Unlock()
			io.Copy(io.Discard, resp.Body) // holds the stream to its end
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	refused := func() int {
		mu.Lock()
		defer mu.Unlock()
		return statuses[http.StatusText(http.StatusTooManyRequests)+" too_many_connections"]
	}
	relaytest.Eventually(t, 30*time.Second, 20*time.Millisecond, func() bool { return refused() > 0 })

	resp := send(t, ctx, "GET", sys.Edges[0]+"/v1/models", nil, keyBeta, nil)
	if resp.StatusCode != http.StatusOK {
		status, code, b := errorOf(t, resp)
		t.Fatalf("beta while acme holds its share: %d %s %s", status, code, b)
	}
	health, err := http.Get("http://" + ops + "/healthz")
	if err != nil || health.StatusCode != http.StatusOK {
		t.Fatalf("ops /healthz: %v, %v", health, err)
	}
	health.Body.Close()
}
