package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/wire"
)

// mockSpec is one fake upstream process, serving one model with a fixed
// answer length and pace. Each figure needs its own pace, and the worker
// routes by model, so one system can hold several.
type mockSpec struct {
	model    string
	tokens   int
	interval time.Duration // negative: full speed
}

// systemSpec is the relay a phase runs against. Every phase starts its
// own roles, so that one phase's load, heap or killed worker does not
// colour the next; they share the nats-server.
type systemSpec struct {
	name        string
	mocks       []mockSpec
	workers     int
	maxInflight int
	// worker settings beyond max_inflight.
	workerSettings procs.Settings
	// breaker is every provider's breaker section; nil: the defaults.
	breaker map[string]any
	// h2c has the roles call the fake upstreams over HTTP/2 without TLS
	// (http2_prior_knowledge); otherwise over HTTP/1.1.
	h2c bool
	// pprof has the edge and the workers serve Go's profiles
	// (profile.go).
	pprof bool
}

type system struct {
	h         *procs.Harness
	mocks     map[string]*procs.Process // by model
	providers []procs.Provider          // the mocks, as the roles see them
	workers   []*procs.Process
	edge      *procs.Process
	// oneProcess is set once edge is `relay dev`, every role in one
	// process with its own embedded NATS, and workers are gone.
	oneProcess bool
}

// startSystem starts spec's roles, after emptying the relay's streams: a
// phase must not inherit requests a failed phase left queued (fresh
// workers would run them), nor pay for its history in reads that span
// the log.
func (b *bench) startSystem(ctx context.Context, spec systemSpec) (*system, error) {
	if err := b.purge(ctx); err != nil {
		return nil, err
	}
	h, nats := b.h, b.nats
	s := &system{h: h, mocks: map[string]*procs.Process{}}
	var providers []procs.Provider
	for _, m := range spec.mocks {
		p, err := h.Start(ctx, procs.Role{
			Role: procs.MockUpstream,
			Name: fmt.Sprintf("%s-mock-%s", spec.name, m.model),
			Settings: procs.Settings{
				"mock_upstream.tokens":         m.tokens,
				"mock_upstream.token_interval": m.interval.String(),
				"mock_upstream.models":         []string{m.model},
			},
		})
		if err != nil {
			s.stop()
			return nil, err
		}
		s.mocks[m.model] = p
		prov := p.Provider(m.model, m.model)
		prov.Breaker = spec.breaker
		prov.HTTP2PriorKnowledge = spec.h2c
		providers = append(providers, prov)
	}
	s.providers = providers
	for i := range spec.workers {
		settings := procs.Settings{"worker.max_inflight": spec.maxInflight}
		for k, v := range spec.workerSettings {
			settings[k] = v
		}
		if spec.pprof {
			settings["pprof_listen"] = pprofSetting["pprof_listen"]
		}
		w, err := h.Start(ctx, procs.Role{
			Role: procs.Worker, Name: fmt.Sprintf("%s-worker-%d", spec.name, i+1),
			NATS: nats, Providers: providers, Settings: settings,
		})
		if err != nil {
			s.stop()
			return nil, err
		}
		s.workers = append(s.workers, w)
	}
	var edgeSettings procs.Settings
	if spec.pprof {
		edgeSettings = pprofSetting
	}
	e, err := h.Start(ctx, procs.Role{Role: procs.Edge, Name: spec.name + "-edge", NATS: nats, Providers: providers, Settings: edgeSettings})
	if err != nil {
		s.stop()
		return nil, err
	}
	s.edge = e
	return s, nil
}

// becomeOneProcess replaces the system's edge and workers with `relay dev`
// named name: embedded NATS, edge, worker (maxInflight slots) and
// coordinator in one process, serving the same fake upstreams. The edge
// and workers are stopped first, so that they take no processor time
// from it.
func (s *system) becomeOneProcess(ctx context.Context, name string, maxInflight int) error {
	roles := append([]*procs.Process{s.edge}, s.workers...)
	s.edge, s.workers = nil, nil
	if err := stopAll(roles); err != nil {
		return err
	}
	dev, err := s.h.Start(ctx, procs.Role{
		Role: procs.Dev, Name: name, Providers: s.providers,
		// A plain relay: the demo's edge serves SSE on the handler's
		// goroutine, not the taken-over connection every other edge uses.
		Settings: procs.Settings{"edge.demo": false, "worker.max_inflight": maxInflight},
	})
	if err != nil {
		return err
	}
	s.edge, s.oneProcess = dev, true
	return nil
}

// stop ends the phase's processes: SIGTERM, then SIGKILL after a bound.
func (s *system) stop() error {
	var all []*procs.Process
	if s.edge != nil {
		all = append(all, s.edge)
	}
	all = append(all, s.workers...)
	for _, m := range s.mocks {
		all = append(all, m)
	}
	return stopAll(all)
}

// stopAll ends processes: SIGTERM, then SIGKILL after a bound.
func stopAll(all []*procs.Process) error {
	for _, p := range all {
		p.Term()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, p := range all {
		if p.Wait(ctx) != nil && ctx.Err() != nil {
			errs = append(errs, p.Kill())
		}
	}
	return errors.Join(errs...)
}

// workerByName finds a worker by its worker.id (the process name).
func (s *system) workerByName(name string) (int, bool) {
	for i, w := range s.workers {
		if w.Name == name {
			return i, true
		}
	}
	return 0, false
}

// purge empties the request queue, the chunk log and the cluster-wide
// provider state (breakers, pauses, quotas...). Roles create them at
// start; before the first phase they do not exist yet. The state must go
// too: a breaker that an overloaded phase opened would refuse the next
// phase's requests for its cooldown.
func (b *bench) purge(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	names := []string{wire.RequestStream, wire.ChunkStream}
	for _, bucket := range wire.SharedStateBuckets {
		names = append(names, "KV_"+bucket) // a KV bucket's stream
	}
	for _, name := range names {
		s, err := b.js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("purge %s: %w", name, err)
		}
		if err := s.Purge(ctx); err != nil {
			return fmt.Errorf("purge %s: %w", name, err)
		}
	}
	return nil
}
