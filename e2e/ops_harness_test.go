package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"

	"github.com/relaydev/relay/relay/app"
	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/quota"
	"github.com/relaydev/relay/relay/relaytest"
)

// opsSystem is a relay whose three roles each serve their ops endpoints
// (/healthz, /readyz, /metrics): a worker, a coordinator and an edge,
// started as the relay binary starts them, each with its own metrics
// registry, against a NATS server the test controls.
type opsSystem struct {
	// Edge, Worker and Coordinator are base URLs ("http://127.0.0.1:port").
	Edge, Worker, Coordinator string
	Mock                      *mockupstream.Server
}

type opsOptions struct {
	// NATSURL is the server every role connects to.
	NATSURL string
	Mock    mockupstream.Config
	// Tune adjusts the configuration every role is started with.
	Tune func(*config.Config)
}

// opsRetry retries fast, so fault scenarios take milliseconds.
var opsRetry = backoff.Config{Base: 10 * time.Millisecond, Cap: 40 * time.Millisecond}

// startOps runs the roles until the test ends. Models: mock-1 (priced,
// one retry of its own, then mock-2) and mock-2.
func startOps(t *testing.T, o opsOptions) *opsSystem {
	t.Helper()
	logger := relaytest.Logger(t)
	ctx, cancel := context.WithCancel(context.Background())
	mock, err := mockupstream.New(o.Mock, logger.With("role", "mock-upstream"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var running []chan error
	run := func(f func() error) {
		done := make(chan error, 1)
		running = append(running, done)
		go func() { done <- f() }()
	}
	t.Cleanup(func() {
		cancel()
		for _, done := range running {
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("role stopped with: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("a role did not stop within 30s")
			}
		}
	})
	run(func() error { return mock.Serve(ctx, ln) })

	cfg := config.Config{
		NATS: natsconn.Config{URL: o.NATSURL},
		Providers: []provider.Config{{
			Name:    "mock",
			BaseURL: "http://" + ln.Addr().String() + "/v1",
			Models:  []string{"mock-1", "mock-2"},
			Retry:   opsRetry,
			// Fault scenarios retry more than a quiet worker's budget allows.
			RetryBudget: quota.BudgetConfig{Ratio: -1},
		}},
		Models: []provider.Model{
			{Name: "mock-1", MaxRetriesPerModel: 1, Fallbacks: []provider.Fallback{{Model: "mock-2"}},
				Price: provider.Price{InputPerMTok: 2, OutputPerMTok: 8}},
			{Name: "mock-2", Price: provider.Price{InputPerMTok: 0.1, OutputPerMTok: 0.42}},
		},
	}
	cfg.Edge.Listen = "127.0.0.1:0"
	cfg.Edge.AllowAnonymous = true // no keys: dev's setting
	cfg.Worker.Listen = "127.0.0.1:0"
	cfg.Coordinator.Listen = "127.0.0.1:0"
	if o.Tune != nil {
		o.Tune(&cfg)
	}
	startRole := func(role config.Role) app.Addrs {
		t.Helper()
		if err := cfg.Validate(role); err != nil {
			t.Fatal(err)
		}
		ready := make(chan app.Addrs, 1)
		run(func() error {
			return app.Run(ctx, role, cfg, logger.With("instance", string(role)), func(a app.Addrs) { ready <- a })
		})
		select {
		case a := <-ready:
			return a
		case <-time.After(20 * time.Second):
			t.Fatalf("%s not ready", role)
			return app.Addrs{}
		}
	}
	s := &opsSystem{Mock: mock}
	s.Coordinator = "http://" + startRole(config.RoleCoordinator).Coordinator
	s.Worker = "http://" + startRole(config.RoleWorker).Worker
	s.Edge = "http://" + startRole(config.RoleEdge).Edge
	return s
}

// get fetches url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// dtoFamily is one metric family as scraped.
type dtoFamily = dto.MetricFamily

// scrape reads the families base/metrics exports.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	status, body := get(t, base+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("GET %s/metrics: %d %s", base, status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse %s/metrics: %v", base, err)
	}
	return mfs
}

// sample sums the samples of a family whose labels include pairs
// (name, value, ...): counter and gauge values, histogram counts. ok is
// false when the family is not exported at all.
func sample(mfs map[string]*dto.MetricFamily, name string, pairs ...string) (v float64, ok bool) {
	mf, ok := mfs[name]
	if !ok {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		match := true
		for i := 0; i+1 < len(pairs); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == pairs[i] && l.GetValue() == pairs[i+1])
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		}
	}
	return v, true
}
