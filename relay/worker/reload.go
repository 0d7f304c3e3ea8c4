package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relaydev/relay/relay/apikeys"
)

// Reload re-reads every provider's api_keys_file now, whether or not it
// looks changed, and checks again the keys whose check failed or could
// not tell; main calls it on SIGHUP. Calls in flight keep their key; the
// next calls use the new ones. A file that cannot be read or holds no key
// leaves that provider's keys as they were, and is in the error.
func (w *Worker) Reload() error {
	var errs []error
	for name, r := range w.keys {
		r.Recheck()
		if r.File() == "" {
			continue
		}
		if err := w.reloadKeys(name, r, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// watchKeys re-reads the key files that changed every interval, so keys
// rotate without a signal. Polling a stat is cheap, needs no inotify, and
// sees a file replaced by rename, the safe way to rotate it.
func (w *Worker) watchKeys(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for name, r := range w.keys {
			if r.File() != "" {
				// Logged by reloadKeys; the next poll tries again.
				_ = w.reloadKeys(name, r, false)
			}
		}
	}
}

// reloadKeys reloads one ring and logs the result, without the keys. A
// poll logs a failure once, not every interval while it lasts; a forced
// reload always does.
func (w *Worker) reloadKeys(name string, r *apikeys.Ring, force bool) error {
	changed, err := r.Reload(force)
	switch {
	case err != nil:
		if r.Failed(err) || force {
			w.logger.Warn("api keys not reloaded; keeping the current ones", "provider", name, "err", err)
		}
		return fmt.Errorf("worker: provider %s: %w", name, err)
	case changed:
		w.logger.Info("api keys reloaded", "provider", name, "keys", r.Count())
		w.metrics.Keys(name, countStates(r.Status()))
	}
	return nil
}

// hasKeyFiles reports whether any provider reads its keys from a file.
func (w *Worker) hasKeyFiles() bool {
	for _, r := range w.keys {
		if r.File() != "" {
			return true
		}
	}
	return false
}
