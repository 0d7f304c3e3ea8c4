package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/apikeys"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// keyRings holds the coordinator's copy of each provider's API keys, the
// same ring type the workers hold, so a probe carries the key the traffic
// carries: the file's current keys, the next key after a refusal.
type keyRings struct {
	logger *slog.Logger

	mu    sync.Mutex
	rings map[string]*apikeys.Ring
}

// ring returns the keys of p, with its api_keys_file re-read if it changed
// since the last probe: a stat per probe is cheap, and no poll is needed
// between probes. A key file that cannot be read is an error of the probe
// (the provider shows red, saying why) and is tried again at the next one,
// rather than a coordinator that does not start: its other duties, the
// handover of dead workers above all, do not need the keys.
func (k *keyRings) ring(p provider.Config) (*apikeys.Ring, error) {
	k.mu.Lock()
	r := k.rings[p.Name]
	k.mu.Unlock()
	if r == nil {
		var err error
		if r, err = apikeys.NewRing(p); err != nil {
			return nil, err
		}
		k.mu.Lock()
		if k.rings == nil {
			k.rings = map[string]*apikeys.Ring{}
		}
		if cur := k.rings[p.Name]; cur != nil {
			r = cur
		} else {
			k.rings[p.Name] = r
		}
		k.mu.Unlock()
		return r, nil
	}
	if r.File() != "" {
		if _, err := r.Reload(false); err != nil && r.Failed(err) {
			// The keys read last are still the best guess; the probe says
			// whether the provider takes them.
			k.logger.Warn("api keys not reloaded; keeping the current ones", "provider", p.Name, "err", err)
		}
	}
	return r, nil
}

// reload re-reads every key file now, changed or not, and joins the
// errors of those that cannot be read.
func (k *keyRings) reload() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for name, r := range k.rings {
		if r.File() == "" {
			continue
		}
		if _, err := r.Reload(true); err != nil {
			errs = append(errs, fmt.Errorf("coordinator: provider %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Reload re-reads every provider's api_keys_file now; main calls it on
// SIGHUP, as it calls the worker's. Probes re-read a changed file anyway;
// this is for a change its metadata does not show.
func (c *Coordinator) Reload() error { return c.keys.reload() }

// probe calls provider p as its probe setting says, model being the
// breaker's model ("" for the provider's health or a provider-wide
// breaker), and judges it by the answer: red if the call failed, yellow
// if it was slow, green otherwise.
func (c *Coordinator) probe(ctx context.Context, p provider.Config, model string) wire.Health {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.HealthTimeout)
	defer cancel()
	h := wire.Health{Provider: p.Name, State: wire.HealthRed}
	start := time.Now()
	err := c.probeWithKeys(ctx, p, model)
	took := time.Since(start)
	h.LatencyMS = took.Milliseconds()
	h.CheckedAt = time.Now().Unix()
	switch {
	case err != nil:
		h.LastError = err.Error()
	case took > c.cfg.SlowThreshold:
		h.State = wire.HealthYellow
		h.LastError = fmt.Sprintf("slow: %v", took.Round(time.Millisecond))
	default:
		h.State = wire.HealthGreen
	}
	return h
}

// probeWithKeys makes the probe call with the key a worker would use now
// and, like a worker, once more with the next key when the provider
// refuses it.
func (c *Coordinator) probeWithKeys(ctx context.Context, p provider.Config, model string) error {
	ring, err := c.keys.ring(p)
	if err != nil {
		return err
	}
	key := ring.Key()
	err = c.probeCall(ctx, p, model, key)
	if err != nil && upstream.Classify(err) == upstream.Credential {
		if next, ok := ring.Reject(key); ok && next != key {
			key = next
			err = c.probeCall(ctx, p, model, key)
		}
	}
	if err == nil {
		ring.Accept(key)
	}
	return err
}

func (c *Coordinator) probeCall(ctx context.Context, p provider.Config, model, key string) error {
	if p.ProbeKind() == provider.ProbeModels {
		return c.probeModels(ctx, p, key)
	}
	return c.probeChat(ctx, p.ProbeModelFor(model), p.Target(key))
}

// probeRequest is the body of a chat probe. It streams because the
// workers' calls do: a provider whose streams fail (or never start) while
// its plain completions work is failing the traffic, and the probe reads
// the answer with the workers' client, so both judge an answer alike.
type probeRequest struct {
	Model     string           `json:"model"`
	Messages  []map[string]any `json:"messages"`
	MaxTokens int              `json:"max_tokens"`
	Stream    bool             `json:"stream"`
}

// probeChat asks for one token of model and reads the stream to its end:
// only a complete answer is a success.
func (c *Coordinator) probeChat(ctx context.Context, model string, t upstream.Target) error {
	body, err := json.Marshal(probeRequest{Model: model, Messages: []map[string]any{{"role": "user", "content": provider.ProbeMessage}}, MaxTokens: 1, Stream: true})
	if err != nil {
		return err
	}
	// ctx bounds the whole probe (health_timeout); the client's own
	// bounds, made for long answers, would only be longer.
	client := upstream.Client{HTTPClient: c.deps.HTTP, FirstByteTimeout: -1, StallTimeout: -1}
	s, err := client.Stream(ctx, t, body)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		if _, err := s.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// probeModels asks for the model list: it tells that the API answers and
// takes the key, not that completions work.
func (c *Coordinator) probeModels(ctx context.Context, p provider.Config, key string) error {
	t := p.Target(key)
	req, err := t.NewRequest(ctx, http.MethodGet, "/models", nil)
	if err != nil {
		return err
	}
	t.Authorize(req.Header)
	resp, err := c.deps.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// A StatusError, as the chat probe's, so a refused key is told
		// apart the same way.
		return &upstream.StatusError{Provider: p.Name, Status: resp.StatusCode}
	}
	return nil
}
