package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// streamWriter is a job's writer of its stream: a chunklog.Writer whose
// appends outlast NATS faults, and which remembers where its last frame is
// stored, so that a job handing its stream over can tell that no one wrote
// after it.
type streamWriter struct {
	w     *chunklog.Writer
	retry retrier
	// last is the JetStream sequence of the last frame this job stored.
	last uint64
}

func newStreamWriter(w *chunklog.Writer, last uint64, retry retrier) *streamWriter {
	return &streamWriter{w: w, retry: retry, last: last}
}

// Seq is the per-stream sequence of the stream's last chunk.
func (s *streamWriter) Seq() uint64 { return s.w.Seq() }

// append stores f after the stream's last frame. It fails at once with
// chunklog.ErrFenced when another writer took the stream, and retries any
// other failure within the retrier's bound: an append whose answer was
// lost is recognised by the writer when it is sent again.
func (s *streamWriter) append(ctx context.Context, f wire.Frame) error {
	return s.retry.do(ctx, "append to the chunk log", func(ctx context.Context) error {
		c, err := s.w.Append(ctx, f)
		if err == nil {
			s.last = c.JSSeq
		}
		return err
	})
}

// retrier retries chunk-log operations that fail for a reason other than a
// lost stream: the connection is down while nats-server restarts, or a
// replicated stream has no leader during an election (4-9 s), during which
// the upstream keeps streaming into the publisher's buffer.
type retrier struct {
	// bound is how long failures are retried; zero or negative: never.
	bound time.Duration
	log   *slog.Logger
}

const (
	// tryTimeout bounds one try, including the read-back the chunklog
	// writer does after an ambiguous failure.
	tryTimeout = 5 * time.Second
	// retryBase and retryCap shape the backoff between tries: short, as
	// a restarted server is back within a second or two.
	retryBase, retryCap = 50 * time.Millisecond, time.Second
)

// do runs op until it succeeds, fails with chunklog.ErrFenced or on a
// closed connection, ctx ends, or bound has passed since the first
// failure.
func (r retrier) do(ctx context.Context, what string, op func(context.Context) error) error {
	b := backoff.Backoff{Config: backoff.Config{Base: retryBase, Cap: retryCap}}
	var deadline time.Time
	for n := 0; ; n++ {
		tryCtx, cancel := context.WithTimeout(ctx, tryTimeout)
		err := op(tryCtx)
		cancel()
		switch {
		case err == nil:
			if n > 0 {
				r.log.Info("chunk log available again", "op", what, "retries", n)
			}
			return nil
		case errors.Is(err, chunklog.ErrFenced), errors.Is(err, nats.ErrConnectionClosed), ctx.Err() != nil, r.bound <= 0:
			// Lost the stream, or the connection was closed for good (the
			// process is stopping): no retry can help.
			return err
		case n == 0:
			deadline = time.Now().Add(r.bound)
			r.log.Warn("chunk log unavailable; retrying", "op", what, "for", r.bound, "err", err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("worker: %s: gave up after %v: %w", what, r.bound, err)
		}
		if err := b.Sleep(ctx, min(b.Delay(n, 0), left)); err != nil {
			return err
		}
	}
}
