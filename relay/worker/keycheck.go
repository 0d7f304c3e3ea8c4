package worker

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/apikeys"
	"github.com/relaydev/relay/relay/fleet/quota"
	"github.com/relaydev/relay/relay/provider"
)

// keyCheckWait bounds how long a starting worker waits for the first
// checks of its keys before it takes requests: long enough for a provider
// that answers, short enough that one that does not (its keys then serve
// unverified) delays nobody much.
const keyCheckWait = 3 * time.Second

// keyReporter is a Gate that publishes the checks of the worker's keys
// (fleet.SharedGate, through its quota reports, for GET /v1/relay/status).
type keyReporter interface {
	ReportKeys(keys func() map[string][]quota.APIKey)
}

// checkKeys starts a Verifier for every provider whose keys are checked
// (verify_keys), on bg until bgCtx ends, and waits until each has checked
// its keys once, keyCheckWait passed, or the worker stops (ctx ends or a
// drain starts).
func (w *Worker) checkKeys(ctx, bgCtx context.Context, bg *sync.WaitGroup) {
	hc := w.upstream.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	var verifiers []*apikeys.Verifier
	for _, p := range w.catalog.Providers() {
		r := w.keys[p.Name]
		w.metrics.Keys(p.Name, countStates(r.Status()))
		if !r.Verifies() || r.Count() == 0 {
			continue
		}
		check := func(cctx context.Context, key string) apikeys.Result { return apikeys.Check(cctx, hc, p, key) }
		v := apikeys.NewVerifier(r, check, w.keyChecked(p, r))
		verifiers = append(verifiers, v)
		bg.Go(func() { v.Run(bgCtx) })
	}
	deadline := time.After(keyCheckWait)
	for _, v := range verifiers {
		select {
		case <-v.Ready():
		case <-ctx.Done():
			return
		case <-w.draining:
			return
		case <-deadline:
			w.logger.Info("api keys still being checked; the unverified ones serve meanwhile", "waited", keyCheckWait)
			return
		}
	}
}

// keyChecked logs and counts the results of p's key checks, naming keys
// by index and fingerprint only.
func (w *Worker) keyChecked(p provider.Config, r *apikeys.Ring) func(apikeys.KeyStatus, apikeys.State) {
	return func(st apikeys.KeyStatus, before apikeys.State) {
		w.metrics.KeyChecked(p.Name, string(st.State))
		w.metrics.Keys(p.Name, countStates(r.Status()))
		log := w.logger.With("provider", p.Name, "key_index", st.Index, "key_fingerprint", st.Fingerprint)
		switch {
		case st.State == apikeys.Failed:
			log.Warn("api key refused by the provider's check; not used while another key is not refused", "reason", st.Reason)
		case st.State == before:
			log.Debug("api key still not verified; checking again later", "reason", st.Reason)
		case st.State == apikeys.Verified:
			log.Info("api key verified")
		case st.State == apikeys.Pending:
			log.Info("api key not verified: the provider could not tell; it serves only while no key is verified, and is checked again later", "reason", st.Reason)
		default:
			log.Info("api key cannot be checked; it serves unverified", "reason", st.Reason)
		}
	}
}

// keyReport describes every provider's keys for the quota report.
func (w *Worker) keyReport() map[string][]quota.APIKey {
	out := make(map[string][]quota.APIKey, len(w.keys))
	for name, r := range w.keys {
		st := r.Status()
		if len(st) == 0 {
			continue
		}
		keys := make([]quota.APIKey, 0, len(st))
		for _, s := range st {
			keys = append(keys, quota.APIKey{Index: s.Index, Fingerprint: s.Fingerprint, State: string(s.State), Reason: s.Reason, CheckedAt: s.At})
		}
		out[name] = keys
	}
	return out
}

// countStates counts keys by the state of their check.
func countStates(st []apikeys.KeyStatus) map[string]int {
	n := map[string]int{}
	for _, s := range st {
		n[string(s.State)]++
	}
	return n
}
