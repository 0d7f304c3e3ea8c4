package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/provider"
)

// The ops tests run every role with its ops endpoints (/healthz, /readyz,
// /metrics): start with options.Coordinator and withOpsModels.

// opsRetry retries fast, so fault scenarios take milliseconds.
var opsRetry = backoff.Config{Base: 10 * time.Millisecond, Cap: 40 * time.Millisecond}

// withOpsModels gives provider "mock" fast retries and no retry budget,
// and prices its models: mock-1 (one retry of its own, then mock-2) and
// mock-2. more, if set, runs after.
func withOpsModels(more func(*config.Config)) func(*config.Config) {
	return func(c *config.Config) {
		c.Providers[0].Retry = opsRetry
		// Fault scenarios retry more than a quiet worker's budget allows.
		c.Providers[0].RetryBudget = quota.BudgetConfig{Ratio: -1}
		c.Models = []provider.Model{
			{Name: "mock-1", MaxRetriesPerModel: 1, Fallbacks: []provider.Fallback{{Model: "mock-2"}},
				Price: provider.Price{InputPerMTok: 2, OutputPerMTok: 8}},
			{Name: "mock-2", Price: provider.Price{InputPerMTok: 0.1, OutputPerMTok: 0.42}},
		}
		if more != nil {
			more(c)
		}
	}
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

// holdOpenBreaker sends a request whose every call to provider "mock"
// fails: failures in a row (five, the shared gate's default) open the
// provider's breaker. The breaker then holds the request back (the shared
// gate waits for its probe); it is cancelled when the test ends.
func holdOpenBreaker(t *testing.T, sys *system, content string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	msgs, _ := prompt("[[mock: status=503, times=0]] "+content, 12)
	held, err := openSSE(ctx, http.MethodPost, sys.Edge+"/v1/chat/completions", chatBody(t, msgs, true), "")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer cancel()
		defer held.Close()
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, sys.Edge+"/v1/streams/"+held.resp.Header.Get("X-Relay-Stream-Id"), nil)
		if res, err := httpClient.Do(req); err == nil {
			res.Body.Close()
		}
	})
}
