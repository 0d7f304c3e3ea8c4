package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// progress tells the server, every interval, that the requests the
// worker holds are still being worked on, so that none is handed to
// another worker while this one streams.
//
// One loop sends every held request's report at once. On a replicated
// request queue each report is a raft proposal of the consumer (the
// server replicates when each delivery was last heard of), and reports
// that reach the server together share a round, where reports sent on
// each request's own timer, spread over the interval, each take one
// (e2e/BENCHMARKS.md, "One loop of progress reports"). One loop also
// costs a job no timer.
type progress struct {
	every  time.Duration
	logger *slog.Logger

	// mu is held while a round is sent, so that the stop of keep waits
	// for a report under way.
	mu   sync.Mutex
	held map[*heldMsg]struct{}
}

// heldMsg is one request kept in progress.
type heldMsg struct {
	msg ackable
}

// ackable is a request's delivery as a job acknowledges it: pulled by
// this worker (a jetstream.Msg), or passed on to it by the worker that
// pulled it (offer.go).
type ackable interface {
	InProgress() error
	DoubleAck(ctx context.Context) error
}

// newProgress reports the requests kept in it every interval, once run.
func newProgress(every time.Duration, logger *slog.Logger) *progress {
	return &progress{every: every, logger: logger, held: map[*heldMsg]struct{}{}}
}

// keep reports msg in progress from the next round on, at most an
// interval from now, until stop is called. Once stop returned no report
// of msg is sent; it may be called more than once.
func (p *progress) keep(msg ackable) (stop func()) {
	h := &heldMsg{msg: msg}
	p.mu.Lock()
	p.held[h] = struct{}{}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.held, h)
		p.mu.Unlock()
	}
}

// run sends a round of reports every interval until ctx ends.
func (p *progress) run(ctx context.Context) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.round()
		}
	}
}

// round sends the report of every request held.
func (p *progress) round() {
	p.mu.Lock()
	defer p.mu.Unlock()
	failed := 0
	var last error
	for h := range p.held {
		if err := h.msg.InProgress(); err != nil {
			failed++
			last = err
		}
	}
	if failed > 0 {
		// The next round tries again; three missed in a row let a
		// request go to another worker, which fences this one.
		p.logger.Warn("progress reports failed", "failed", failed, "held", len(p.held), "err", last)
	}
}
