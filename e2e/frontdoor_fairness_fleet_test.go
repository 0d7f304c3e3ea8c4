package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/mockupstream"
)

// fleetFairStartBound is the stated bound on how long a tenant's first
// token waits behind another tenant's backlog, however many edges the
// backlog is spread over.
const fleetFairStartBound = time.Second

// processTenants are edge settings of acme's and beta's keys, with no
// anonymous access, for the process tests.
func processTenants() map[string]any {
	return map[string]any{
		"edge.allow_anonymous":     false,
		"edge.resume_token_secret": tokenSecret,
		"edge.api_keys": []map[string]any{
			{"tenant": "acme", "key_sha256": sha256Hex(keyAcme)},
			{"tenant": "beta", "key_sha256": sha256Hex(keyBeta), "models": []string{"mock-2"}},
		},
	}
}

// holdOpen sends a request of key and, once its answer began (the first
// data line), counts it in began and reads on until ctx ends; refused
// counts an answer that did not begin.
func holdOpen(ctx context.Context, url, body, key string, began, refused *atomic.Int32) {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		refused.Add(1)
		return
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if strings.HasPrefix(line, "data:") {
			began.Add(1)
			break
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// Acme queues a backlog of slow streams on each of three edges, three
// times the fleet's four slots on each; beta's request on one edge then
// has its first token within fleetFairStartBound. Each edge hears the
// others' lines (relay.gate.<node>), so acme's share is the fleet's and
// its backlog waits at the edges, leaving the reserve slot for beta;
// were each edge to share the slots on its own, acme's backlog would
// reach the queue from every edge, ahead of beta.
func TestFairTenantsBacklogOverEdgesDoesNotDelayAnother(t *testing.T) {
	s := start(t, options{
		Processes: true, Edges: 3, Workers: 1,
		// Each answer takes about 6s.
		Mock:           mockupstream.Config{Tokens: 60, TokenInterval: 100 * time.Millisecond},
		EdgeSettings:   processTenants(),
		WorkerSettings: map[string]any{"worker.max_inflight": 4},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	body := func(text string) string {
		return `{"model":"mock-2","stream":true,"messages":[{"role":"user","content":"` + text + `"}]}`
	}
	// Which edges reported their lines, since when.
	var mu sync.Mutex
	reported := map[string]time.Time{}
	sub, err := s.nc.Subscribe("relay.gate.*", func(m *nats.Msg) {
		var r struct{ Node string }
		if json.Unmarshal(m.Data, &r) == nil {
			mu.Lock()
			reported[r.Node] = time.Now()
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// One answer on each edge first: each has heard the worker's
	// heartbeats and knows its slots.
	var warming []*http.Response
	for _, e := range s.Edges {
		warming = append(warming, send(t, ctx, "POST", e+"/v1/chat/completions", []byte(body("warm")), keyBeta, nil))
	}
	for i, resp := range warming {
		if tr := transcriptOf(t, resp, nil, 0); tr.status != "done" && tr.finish != "stop" {
			t.Fatalf("the first answer on %s ended status %q", s.Edges[i], tr.status)
		}
	}
	warm := time.Now()
	waitFor(t, 10*time.Second, "every edge to report its lines to the others", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, at := range reported {
			if at.After(warm) {
				n++
			}
		}
		return n == len(s.Edges)
	})

	backlog, stopBacklog := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopBacklog(); wg.Wait() }()
	var began, refused atomic.Int32
	for i := range 12 * len(s.Edges) {
		wg.Go(func() {
			holdOpen(backlog, s.Edges[i%len(s.Edges)]+"/v1/chat/completions", body("acme "+string(rune('a'+i%26))), keyAcme, &began, &refused)
		})
	}
	waitFor(t, 20*time.Second, "acme's generations to fill the usable slots", func() bool { return began.Load() >= 3 })

	start := time.Now()
	resp := send(t, ctx, "POST", s.Edges[0]+"/v1/chat/completions", []byte(body("beta")), keyBeta, nil)
	tr := transcriptOf(t, resp, nil, 2)
	if waited := time.Since(start); waited > fleetFairStartBound {
		t.Errorf("beta's first token came after %v, over the bound of %v", waited, fleetFairStartBound)
	} else {
		t.Logf("beta's first token came after %v", waited)
	}
	transcriptOf(t, resp, tr, 0)
	if tr.status != "done" && tr.finish != "stop" {
		t.Errorf("beta's answer ended status %q, finish %q", tr.status, tr.finish)
	}
	if n := refused.Load(); n > 0 {
		t.Errorf("%d of acme's requests were refused: its backlog should wait its turn", n)
	}
}

// Acme's slow streamed completions, as many as the worker's slots, hold
// all but one of them (the last is refused, retryable); beta's embeddings
// are answered beside them within fleetFairStartBound, not refused for a
// worker with no room.
func TestFairForwardedEndpointsShareTheWorkersSlots(t *testing.T) {
	const slots = 8
	s := start(t, options{
		Processes: true, Edges: 1, Workers: 1,
		// Each completion streams for about 20s.
		Mock:           mockupstream.Config{Tokens: 200, TokenInterval: 100 * time.Millisecond},
		EdgeSettings:   processTenants(),
		WorkerSettings: map[string]any{"worker.max_inflight": slots},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	slow, stopSlow := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopSlow(); wg.Wait() }()
	var began, refused atomic.Int32
	for range slots {
		wg.Go(func() {
			holdOpen(slow, s.Edge+"/v1/completions", `{"model":"mock-2","stream":true,"prompt":"take your time"}`, keyAcme, &began, &refused)
		})
	}
	waitFor(t, 20*time.Second, "acme's completions to take the worker's slots", func() bool {
		return began.Load()+refused.Load() == slots
	})

	start := time.Now()
	resp := send(t, ctx, "POST", s.Edge+"/v1/embeddings", []byte(`{"model":"mock-2","input":["beta's"]}`), keyBeta, nil)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("beta's embeddings beside acme's %d completions: status %d, %s", began.Load(), resp.StatusCode, raw)
	}
	if waited := time.Since(start); waited > fleetFairStartBound {
		t.Errorf("beta's embeddings took %v, over the bound of %v", waited, fleetFairStartBound)
	}
	if n := began.Load(); n < slots-1 {
		t.Errorf("%d of acme's completions ran; want all but the slot kept for another tenant", n)
	}
}
