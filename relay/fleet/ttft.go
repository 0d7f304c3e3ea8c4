package fleet

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/fleet/quota"
)

// TTFTKey is the key of the fleet's first-token figures in the quota
// bucket (quota.TTFTFigures), which the coordinator writes every round.
const TTFTKey = "ttft"

// ttftFigures is a worker's side of the shared first-token times: the
// times of its own calls, by "<provider>/<model>", which its quota report
// carries, and the fleet's figures, read back every interval.
type ttftFigures struct {
	mu     sync.Mutex
	own    map[string]*quota.TTFTWindow
	shared quota.TTFTFigures
}

func newTTFTFigures() *ttftFigures {
	return &ttftFigures{own: map[string]*quota.TTFTWindow{}}
}

// observe records a call's time to first token.
func (f *ttftFigures) observe(target string, d time.Duration, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.own[target]
	if w == nil {
		w = &quota.TTFTWindow{}
		f.own[target] = w
	}
	w.Observe(now, d)
}

// addToReport adds the worker's recent times to r.
func (f *ttftFigures) addToReport(r *quota.Report, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for target, w := range f.own {
		if h := w.Histogram(now); h != nil {
			if r.TTFT == nil {
				r.TTFT = map[string]quota.TTFTHistogram{}
			}
			r.TTFT[target] = h
		}
	}
}

// follow reads the fleet's figures every interval until ctx ends. Figures
// older than two windows (no coordinator lately) are dropped: hedging
// then falls back to its fixed delay.
func (f *ttftFigures) follow(ctx context.Context, kv jetstream.KeyValue, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		var figs quota.TTFTFigures
		rctx, cancel := context.WithTimeout(ctx, interval)
		e, err := kv.Get(rctx, TTFTKey)
		cancel()
		if err == nil && json.Unmarshal(e.Value(), &figs) == nil && time.Since(figs.At) < 2*quota.TTFTWindowSpan {
			f.mu.Lock()
			f.shared = figs
			f.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// quantile is the fleet's q-th quantile of target's times, if known.
func (f *ttftFigures) quantile(target string, q float64) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.shared.At) >= 2*quota.TTFTWindowSpan {
		return 0, false
	}
	return f.shared.Targets[target].Histogram.Quantile(q)
}

// TTFTQuantile is the q-th quantile of the fleet's recent first-token
// times of model on provider, as the coordinator last published them;
// false while there are none, or too few.
func (g *SharedGate) TTFTQuantile(provider, model string, q float64) (time.Duration, bool) {
	return g.ttft.quantile(provider+"/"+model, q)
}

// MergeTTFT adds up the first-token times of the fresh reports, per
// target: the coordinator's figures.
func MergeTTFT(reports []quota.Report, now time.Time) quota.TTFTFigures {
	sum := map[string]quota.TTFTHistogram{}
	for _, r := range reports {
		for target, h := range r.TTFT {
			if sum[target] == nil {
				sum[target] = quota.TTFTHistogram{}
			}
			sum[target].Add(h)
		}
	}
	figs := quota.TTFTFigures{At: now.UTC(), Targets: map[string]quota.TTFTFigure{}}
	for target, h := range sum {
		figs.Targets[target] = quota.NewTTFTFigure(h)
	}
	return figs
}
