package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/relaydev/relay/relay"
	"github.com/relaydev/relay/relay/app"
	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/upstream"
)

// The resilience tests run a real nats-server, the fake upstream on a
// loopback port behind a front that logs every request it sees, an edge
// started as the relay binary starts it, and a worker started with a gate
// that records every admission and outcome report (the breaker's view).

// fastRetry keeps backoff short; the delays themselves are the backoff
// package's tests' concern.
var fastRetry = backoff.Config{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond}

// resilience configures one test's system.
type resilience struct {
	mock mockupstream.Config
	// tune edits the configuration after the defaults: one provider
	// "mock" serving mock-1 and mock-2 with fastRetry, generous timeouts
	// and the mock's API keys.
	tune func(cfg *config.Config, mockURL string)
	// mockLater leaves the mock's port closed until the test calls
	// serveMock: calls to it are refused until then.
	mockLater bool
}

// rsys is a running resilience system.
type rsys struct {
	t       *testing.T
	edge    string // base URL
	mock    *mockupstream.Server
	mockURL string // the provider base URL of the mock
	calls   *callLog
	gate    *gateLog
	worker  *relay.Worker

	serveOnce sync.Once
	serve     func()
}

func startResilience(t *testing.T, o resilience) *rsys {
	t.Helper()
	logger := relaytest.Logger(t)
	srv := relaytest.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	var running []chan error
	run := func(f func() error) {
		done := make(chan error, 1)
		running = append(running, done)
		go func() { done <- f() }()
	}
	t.Cleanup(func() {
		cancel()
		for _, done := range running {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("role stopped with: %v", err)
			}
		}
	})

	mock, err := mockupstream.New(o.mock, logger.With("role", "mock-upstream"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	s := &rsys{t: t, mock: mock, mockURL: "http://" + addr + "/v1", calls: &callLog{}, gate: &gateLog{}}
	front := &http.Server{Handler: s.calls.front(mock.Handler()), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		front.Close()
	}()
	serve := func(l net.Listener) { run(func() error { return front.Serve(l) }) }
	if o.mockLater {
		// Nothing listens on the port until serveMock takes it back.
		ln.Close()
		s.serve = func() {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				t.Errorf("listen again on %s: %v", addr, err)
				return
			}
			serve(l)
		}
	} else {
		s.serve = func() { serve(ln) }
		s.serveMock()
	}

	cfg := config.Config{
		NATS: natsconn.Config{URL: srv.ClientURL()},
		Providers: []provider.Config{{
			Name:              "mock",
			BaseURL:           s.mockURL,
			APIKeys:           o.mock.APIKeys,
			Models:            []string{"mock-1", "mock-2"},
			Retry:             fastRetry,
			FirstTokenTimeout: 5 * time.Second,
			StallTimeout:      5 * time.Second,
		}},
	}
	cfg.Edge.Listen = "127.0.0.1:0"
	cfg.Edge.AllowAnonymous = true
	cfg.Worker.ID = "resilience-worker"
	if o.tune != nil {
		o.tune(&cfg, s.mockURL)
	}
	for _, role := range []config.Role{config.RoleWorker, config.RoleEdge} {
		if err := cfg.Validate(role); err != nil {
			t.Fatal(err)
		}
	}

	nc, js := relaytest.Connect(t, srv, cfg.Streams)
	catalog, err := cfg.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	s.worker, err = relay.New(cfg.Worker, relay.Deps{
		NC: nc, JS: js, Catalog: catalog,
		Upstream: upstream.NewClient(&http.Client{}),
		Logger:   logger.With("role", "worker"),
		Topology: cfg.Streams,
		Gate:     s.gate,
	})
	if err != nil {
		t.Fatal(err)
	}
	run(func() error { return s.worker.Run(ctx) })

	ready := make(chan app.Addrs, 1)
	run(func() error {
		return app.Run(ctx, config.RoleEdge, cfg, logger.With("role", "edge"), func(a app.Addrs) { ready <- a })
	})
	select {
	case a := <-ready:
		s.edge = "http://" + a.Edge
	case <-time.After(20 * time.Second):
		t.Fatal("edge not ready")
	}
	return s
}

// serveMock starts serving the mock on its port (once).
func (s *rsys) serveMock() { s.serveOnce.Do(s.serve) }

// upstreamCall is one request the fake upstream received.
type upstreamCall struct {
	at    time.Time
	key   string // the bearer token, "" for none
	model string
	// roles are the roles of the request's messages, in order: a
	// continuation ends in "assistant" (prefill) or "assistant", "user"
	// (prompt mode).
	roles []string
}

// callLog is the front of the fake upstream: it logs each chat request
// and passes it on.
type callLog struct {
	mu    sync.Mutex
	calls []upstreamCall
}

func (l *callLog) front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Model    string `json:"model"`
				Messages []struct {
					Role string `json:"role"`
				} `json:"messages"`
			}
			_ = json.Unmarshal(body, &req)
			c := upstreamCall{at: time.Now(), model: req.Model}
			if auth := r.Header.Get("Authorization"); len(auth) > len("Bearer ") {
				c.key = auth[len("Bearer "):]
			}
			for _, m := range req.Messages {
				c.roles = append(c.roles, m.Role)
			}
			l.mu.Lock()
			l.calls = append(l.calls, c)
			l.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (l *callLog) all() []upstreamCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]upstreamCall(nil), l.calls...)
}

// gateLog is the worker's Gate: it admits every call, runs beforeAdmit
// first if set, and keeps every report, which is what a circuit breaker
// would count.
type gateLog struct {
	mu          sync.Mutex
	admits      int
	reports     []relay.Report
	beforeAdmit func(n int, provider string)
}

func (g *gateLog) Admit(_ context.Context, provider, _ string) (relay.Ticket, error) {
	g.mu.Lock()
	g.admits++
	n, hook := g.admits, g.beforeAdmit
	g.mu.Unlock()
	if hook != nil {
		hook(n, provider)
	}
	return gateTicket{g}, nil
}

type gateTicket struct{ g *gateLog }

func (t gateTicket) Done(r relay.Report) {
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	t.g.reports = append(t.g.reports, r)
}

// verdicts returns "provider/model:verdict" per report, in order.
func (g *gateLog) verdicts() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, r := range g.reports {
		out = append(out, r.Provider+"/"+r.Model+":"+r.Verdict.String())
	}
	return out
}

// report returns the i-th report.
func (g *gateLog) report(i int) relay.Report {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reports[i]
}

// failures counts the reports a breaker would count against provider.
func (g *gateLog) failures(provider string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, r := range g.reports {
		if r.Provider == provider && r.Verdict == relay.Failure {
			n++
		}
	}
	return n
}

func (g *gateLog) setBeforeAdmit(f func(n int, provider string)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.beforeAdmit = f
}
