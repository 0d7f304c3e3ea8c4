package worker

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/metrics"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/wire"
)

// newMetrics registers the worker's families with reg (nil: a private
// registry), with label values bounded by the catalog's providers and
// models and by the configured tenants.
func newMetrics(reg prometheus.Registerer, catalog *provider.Catalog, tenants []string) (*metrics.Worker, error) {
	var providers []string
	for _, p := range catalog.Providers() {
		providers = append(providers, p.Name)
	}
	return metrics.NewWorker(reg, metrics.NewNames(providers, catalog.Models(), tenants))
}

// jobStats is what a job's metrics and its "job finished" line need
// beyond what the job keeps for itself.
type jobStats struct {
	// providers and models are those called, in the order first called.
	providers, models []string
}

// attemptObs observes one upstream call of a job.
type attemptObs struct {
	j     *job
	c     *provider.Candidate // the route's: read, never written
	start time.Time
	// fresh: the stream had no chunk when the call started, so its first
	// token is the stream's.
	fresh bool
	// usage and cost are the job's before the call.
	usage wire.Usage
	cost  float64
}

// observe counts an upstream call of candidate c and starts observing it.
func (j *job) observe(c *provider.Candidate, seam wire.Seam) *attemptObs {
	s := &j.stats
	if !slices.Contains(s.providers, c.Provider.Name) {
		s.providers = append(s.providers, c.Provider.Name)
	}
	if !slices.Contains(s.models, c.Model) {
		s.models = append(s.models, c.Model)
	}
	j.w.metrics.Attempt(c.Provider.Name, c.Model, metrics.SeamOf(seam))
	ob := &attemptObs{j: j, c: c, start: time.Now(), fresh: j.writer.Seq() == 0, cost: j.cost}
	if j.usage != nil {
		ob.usage = *j.usage
	}
	return ob
}

// done records what the call produced: its time to first token, which
// it returns (zero if none), its chunks, and the tokens and cost it
// added.
func (ob *attemptObs) done(pub *publisher) (ttft time.Duration) {
	j, m := ob.j, ob.j.w.metrics
	p, model := ob.c.Provider.Name, ob.c.Model
	if first := pub.firstContent(); !first.IsZero() {
		ttft = first.Sub(ob.start)
		m.UpstreamTTFT(p, model, ttft)
		if ob.fresh && pub.chunks > 0 {
			// The stream's first token, unless nothing of the call was
			// published (a first delivery whose claim failed).
			m.TTFT(p, model, first.Sub(j.start))
		}
	}
	m.ChunksPublished(p, model, pub.chunks)
	var now wire.Usage
	if j.usage != nil {
		now = *j.usage
	}
	m.Usage(p, model, j.req.Tenant, now.PromptTokens-ob.usage.PromptTokens, now.CompletionTokens-ob.usage.CompletionTokens, j.cost-ob.cost)
	return ttft
}

// firstContent is when the publisher was handed its first text,
// reasoning, refusal or tool call; zero if never.
func (p *publisher) firstContent() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firstAt
}

// upstreamTTFTMS is the call's time to first token in milliseconds, at
// least 1 once known, for the stream's first chunk (wire.Frame
// UpstreamTTFTMS). The caller holds no lock.
func (p *publisher) upstreamTTFTMS() int64 {
	first := p.firstContent()
	if first.IsZero() || p.callStart.IsZero() {
		return 0
	}
	return max(first.Sub(p.callStart).Milliseconds(), 1)
}

// finished counts the job's end and returns the attributes its "job
// finished" line adds: tenant, every provider and model called, tokens.
func (j *job) finished(status string) []slog.Attr {
	j.w.metrics.JobFinished(metrics.JobOutcomeOf(status))
	var u wire.Usage
	if j.usage != nil {
		u = *j.usage
	}
	return []slog.Attr{
		slog.String("tenant", j.req.Tenant),
		slog.Any("providers", j.stats.providers),
		slog.Any("models", j.stats.models),
		slog.Int("prompt_tokens", u.PromptTokens),
		slog.Int("completion_tokens", u.CompletionTokens),
	}
}

// meteredGate times every admission: a long one is a wait (a shared
// Retry-After, a quota), a refusal an open breaker.
type meteredGate struct {
	Gate
	m *metrics.Worker
}

func (g meteredGate) Admit(ctx context.Context, provider, model string) (fleet.Ticket, error) {
	start := time.Now()
	t, err := g.Gate.Admit(ctx, provider, model)
	refused := err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled)
	g.m.Admitted(provider, time.Since(start), refused)
	return t, err
}

// validListen reports whether addr is host:port (Config.Listen).
func validListen(addr string) bool {
	_, _, err := net.SplitHostPort(addr)
	return err == nil
}
