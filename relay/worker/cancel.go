package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// followCancels routes cancel notices (wire.CancelSubject) to the jobs
// of their stream, which close their upstream call at once and end the
// stream cancelled. It is one wildcard subscription per worker: every
// worker hears every notice, which costs little as notices are rare and
// small, where a subscription per job would add a subscribe and an
// unsubscribe to every request's path.
func (w *Worker) followCancels() (*nats.Subscription, error) {
	prefix := wire.CancelSubject("")
	sub, err := w.nc.Subscribe(prefix+"*", func(m *nats.Msg) {
		id := strings.TrimPrefix(m.Subject, prefix)
		if n := w.jobs.cancel(id); n > 0 {
			w.logger.Info("cancel notice", "stream", id)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("worker: subscribe to cancel notices: %w", err)
	}
	return sub, nil
}

// metaTimeout bounds reading a stream's metadata.
const metaTimeout = 2 * time.Second

// checkCancelled starts cancelledEarlier on one of the worker's runners;
// its answer comes on the channel returned.
func (j *job) checkCancelled() <-chan bool {
	cancelled := make(chan bool, 1)
	j.w.runners.Run(func() { cancelled <- j.cancelledEarlier(j.logCtx) })
	return cancelled
}

// cancelledEarlier reports whether the stream's metadata records that its
// client cancelled it before this job started. A stream without metadata
// (the record expired, or a request queued by other means) or whose
// metadata cannot be read now is not: a cancellation that comes while the
// job runs still reaches it as a notice.
func (j *job) cancelledEarlier(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	e, err := j.w.meta.Get(ctx, j.req.StreamID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false
	}
	if err != nil {
		j.log.Warn("stream metadata unreadable; assuming not cancelled", "err", err)
		return false
	}
	var m wire.Meta
	if err := json.Unmarshal(e.Value(), &m); err != nil {
		j.log.Warn("stream metadata malformed; assuming not cancelled", "err", err)
		return false
	}
	return m.Cancelled
}
