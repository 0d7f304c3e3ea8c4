package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/liveness"
	"github.com/relaydev/relay/relay/upstream"
	"github.com/relaydev/relay/relay/wire"
)

// job is one request being served: the stream's writer and what the job
// has done to the stream so far. It lives on one slot's goroutine.
type job struct {
	w     *Worker
	req   wire.Request
	log   *slog.Logger
	start time.Time
	// header is the request message's (the trace context).
	header nats.Header

	// msg is the request's delivery, which the job acknowledges; nil for
	// a job started from an offer until it adopts the delivery (offer.go).
	// delivery names it in heartbeats and handovers; its Seq is zero if
	// the message's metadata could not be read, or while msg is nil.
	// stopProgress ends the progress reports on it. Once settled (the job
	// acks, hands over or gives the stream up), the job adopts no
	// delivery. The four are guarded by the worker's inflight lock for as
	// long as a delivery may be adopted.
	msg          ackable
	delivery     wire.Delivery
	stopProgress func()
	settled      bool
	// offered: the job was started from an offer, before any delivery;
	// offer is that offer until the job answered it (startClaim).
	offered bool
	offer   *nats.Msg
	// queued is when JetStream stored the request, or the offer came;
	// zero if unknown.
	queued time.Time
	// logCtx serves the chunk log and the ack, to the end of the job.
	// callCtx serves the upstream calls and the waits between them;
	// stopCall ends it with the cause errCancelled or errHandover, and the
	// job then still publishes what it received and ends or hands over
	// the stream.
	logCtx, callCtx context.Context
	stopCall        context.CancelCauseFunc

	writer *streamWriter
	// firstClaim, while runFirst serves, is the claim frame being stored
	// as the first call starts: publishers wait for it.
	firstClaim *firstClaim
	// text is every chunk's content in the stream so far, earlier owners'
	// included: what a continuation continues.
	text strings.Builder
	// tokensOut counts the tokens in text, as the chunks count them
	// (wire.Frame.Tokens).
	tokensOut int
	// toolCalls reports that some chunk carried tool calls; such an answer
	// is never continued.
	toolCalls bool
	// received counts the deltas with content (text, reasoning, refusal or
	// tool calls) this job's calls received, before any filtering: a call
	// that got one was answered by a working provider
	// (fleet.Report.Streamed).
	received int
	// promptMode is set once a provider refused a prefill: the rest of the
	// request continues in prompt mode.
	promptMode bool
	// attempts counts upstream calls in the stream, earlier owners' included
	// as far as their chunks tell.
	attempts int
	// usage sums the usage the providers reported to this job, and cost
	// prices it by the model of each call.
	usage *wire.Usage
	cost  float64
	// chunks counts the chunks this job appended.
	chunks int
	// provider and model are those of the latest attempt; model is what the
	// provider said it ran.
	provider, model string
	// routed is where the stream went, once serve walked a route
	// (judge.go).
	routed *routed
	// kept is the answer cache's answer to the request, once looked up
	// (answer_cache.go).
	kept *keptLookup
	// stats feeds the metrics and the "job finished" line (observe.go).
	stats jobStats
	// trace is the job's span and what its attempts' spans need (tracing.go).
	trace jobTrace
}

// newJob is the job of req, delivered as msg.
func newJob(ctx context.Context, w *Worker, msg jetstream.Msg, req wire.Request, stopProgress func()) *job {
	j := &job{w: w, msg: msg, req: req, log: w.logger.With("stream", req.StreamID), start: time.Now(), header: msg.Headers(), stopProgress: stopProgress}
	d, err := liveness.DeliveryOf(msg, req.StreamID)
	if err != nil {
		j.log.Warn("request cannot be handed over", "err", err)
	}
	d.Tenant = req.Tenant
	j.delivery = d
	if md, err := msg.Metadata(); err == nil {
		j.queued = md.Timestamp
	}
	j.startContexts(ctx)
	return j
}

// offeredJob is the job of a request taken from offer o: it has no
// delivery until one is passed to it (offer.go).
func offeredJob(ctx context.Context, w *Worker, o offer) *job {
	now := time.Now()
	req := o.req
	j := &job{w: w, req: req, log: w.logger.With("stream", req.StreamID), start: now, header: o.msg.Header, stopProgress: func() {}, offered: true, offer: o.msg, queued: now}
	j.delivery = wire.Delivery{StreamID: req.StreamID, Tenant: req.Tenant}
	j.startContexts(ctx)
	return j
}

func (j *job) startContexts(ctx context.Context) {
	j.logCtx = j.traceJob(ctx)
	j.callCtx, j.stopCall = context.WithCancelCause(j.logCtx)
}

// retry is the job's retrier of chunk-log operations.
func (j *job) retry() retrier { return retrier{bound: j.w.appendRetry, log: j.log} }

// run serves the request: it claims the stream, streams an answer (or the
// rest of an earlier owner's) and ends the stream, unless it finds the
// stream ended or loses it. A stream whose client cancelled it before is
// ended cancelled without publishing a chunk. The stream's metadata is
// read for that while the stream is claimed.
//
// This is the one place that decides the order of claim and call. A first
// delivery (NumDelivered 1) calls its provider while its claim frame is
// being stored (runFirst): no worker had the request before, so the stream
// is empty and the claim needs nothing read first, and the claim's round
// trip to JetStream then overlaps the provider's time to first token
// instead of adding to it. A redelivery or a takeover must first read what
// earlier owners published, which its call continues, so it reads, claims
// and then calls. So does a first delivery that waited in the queue for
// freshFor or longer (a backlog, where clients give up): its stream is
// checked for a cancellation before any provider is called and paid.
func (j *job) run() {
	defer j.stopCall(nil)
	if j.offered {
		if !j.runFirst() {
			// The worker the queue gave the request to claimed it first
			// (the edge stopped waiting for this one's answer): it serves.
			j.release()
			j.report(slog.LevelInfo, "fenced", nil)
		}
		return
	}
	// A request taken from an offer whose taker no longer served it when
	// its delivery came was started: its stream is read first.
	if j.delivery.Delivered == 1 && j.fresh() && j.header.Get(wire.HeaderTakenBy) == "" {
		if j.runFirst() {
			return
		}
		// A frame existed all the same (a request queued twice): the
		// claim was fenced before anything was published.
		j.log.Info("first delivery found frames; reading the stream")
	}
	j.runClaimed()
}

// runClaimed serves a request whose stream it reads and claims before it
// calls anyone (see run).
func (j *job) runClaimed() {
	takeover, ok := j.claimStream()
	if !ok {
		return
	}
	j.end(j.serve(j.callCtx, takeover))
}

// claimStream reads and claims the stream for run, and reports whether
// the job goes on to answer; takeover says that earlier owners published
// in it. It ends a stream found cancelled, and abandons one it could not
// claim.
func (j *job) claimStream() (takeover, ok bool) {
	cancelled := j.checkCancelled()
	h, err := j.claim()
	wasCancelled := <-cancelled
	if err != nil {
		j.abandon(err)
		return false, false
	}
	if h.ended {
		// A duplicate, or a redelivery whose ack was lost: nothing to do
		// but count the usage, in case the job that ended it could not.
		j.settleLater(h.end)
		j.report(slog.LevelInfo, "already_ended", nil)
		return false, false
	}
	if wasCancelled {
		j.stopCall(errCancelled)
		j.end(outcome{err: errCancelled, class: upstream.Canceled})
		return false, false
	}
	return h.seq > 0, true
}

// freshFor is how long a first delivery may have waited in the queue and
// still call its provider before its stream's metadata is read. A client
// can cancel a stream only once it learned the stream's id, when the
// request was already queued; one picked up this soon was cancelled before
// only in a race that a cancellation just after the pickup loses the same
// way (one call, stopped at once).
const freshFor = 250 * time.Millisecond

// fresh reports that the request was queued less than freshFor before the
// job started. An unknown queueing time counts as stale: the slower order
// is the safe one.
func (j *job) fresh() bool {
	return !j.queued.IsZero() && j.start.Sub(j.queued) < freshFor
}

// claim reads what the stream holds and appends the job's claim frame
// after it; a stream found ended is not claimed.
func (j *job) claim() (history, error) {
	var h history
	err := j.retry().do(j.logCtx, "read the stream", func(ctx context.Context) (err error) {
		h, err = readHistory(ctx, j.w.reader, j.req.StreamID)
		return err
	})
	if err != nil || h.ended {
		return h, err
	}
	return j.claimAfter(h)
}

// claimAfter appends the claim frame after h's last frame and takes over
// what h says earlier owners published.
func (j *job) claimAfter(h history) (history, error) {
	j.takeOver(&h)
	return h, j.appendClaim()
}

// takeOver sets the job up to continue what h says earlier owners
// published, with a writer chained on h's last frame.
func (j *job) takeOver(h *history) {
	j.attempts = h.attempts
	j.text.Reset()
	j.text.WriteString(h.text)
	j.tokensOut = h.tokens
	j.toolCalls = h.toolCalls
	j.writer = newStreamWriter(j.w.newWriter(j.req.StreamID, h.last, h.seq), h.last, j.retry())
}

// end appends the terminal frame for out and acknowledges the request. A
// job that lost the stream abandons it; one stopped for a handover hands
// it over; one whose client cancelled it ends it cancelled, unless the
// answer was finished anyway. A request no provider could take may be
// answered from the cache first, and a finished answer is kept there
// (answer_cache.go).
//
// It runs on one of the worker's runners (Worker.aside).
func (j *job) end(out outcome) {
	j.w.aside(func() { j.endAside(out) })
}

// endAside is end, on a runner.
func (j *job) endAside(out outcome) {
	out = j.orKept(out)
	cause := context.Cause(j.callCtx)
	switch {
	case out.logErr != nil:
		j.abandon(out.logErr)
		return
	case out.err != nil && errors.Is(cause, errHandover):
		j.handOver()
		return
	case out.err != nil && errors.Is(cause, errCancelled):
		out.err = errCancelled
	}
	f := j.endFrame(out)
	f.TraceParent = j.traceParent()
	if err := j.writer.append(j.logCtx, f); err != nil {
		j.abandon(err)
		return
	}
	j.settleLater(f)
	j.judge(f.Status)
	level := slog.LevelInfo
	if out.err != nil && out.class != upstream.RequestFault && out.class != upstream.Canceled {
		// The client's own mistakes and cancellations are not the relay's
		// warnings.
		level = slog.LevelWarn
	}
	j.report(level, string(f.Status), out.err)
	j.keep(f)
}

// abandon leaves the stream without a terminal frame and without acking.
// A fenced job must never ack, nor NAK: acks are matched by sequence only,
// and the new owner's delivery is the same message. Any other failure
// (the chunk log unavailable beyond the retry bound) leaves the request to
// AckWait, by which time NATS may be back.
func (j *job) abandon(err error) {
	j.release()
	if errors.Is(err, chunklog.ErrFenced) {
		j.report(slog.LevelInfo, "fenced", nil)
		return
	}
	j.report(slog.LevelWarn, "abandoned", err)
}

// handoverTimeout bounds checking the stream and giving the request back.
const handoverTimeout = 5 * time.Second

// errWritten stops a read at the first frame found.
var errWritten = errors.New("worker: frame found")

// handOver gives the request back to the queue at once, so that another
// worker continues the stream: unless another writer appended after this
// job's last frame (the stream is no longer the job's to give), it records
// the handover and NAKs the delivery (liveness.HandOver), which a watcher
// that thought this worker dead cannot do a second time.
//
// A job started from an offer that no delivery reached yet has nothing to
// give back: the worker the queue gives the request to finds it gone and
// continues the stream itself (offer.go).
func (j *job) handOver() {
	_, d := j.release()
	ctx, cancel := context.WithTimeout(j.logCtx, handoverTimeout)
	defer cancel()
	_, err := j.w.reader.Read(ctx, j.req.StreamID, j.writer.last, func(chunklog.Entry) error { return errWritten })
	switch {
	case errors.Is(err, errWritten):
		j.report(slog.LevelInfo, "fenced", nil)
		return
	case err != nil:
		j.report(slog.LevelWarn, "abandoned", fmt.Errorf("worker: hand over: %w", err))
		return
	case d.Reply == "":
		j.report(slog.LevelInfo, "handed_over", nil)
		return
	}
	err = liveness.HandOver(ctx, j.w.nc, j.w.handovers, d, j.w.id)
	switch {
	case errors.Is(err, liveness.ErrHandedOver):
		// A watcher took this worker for dead in the meantime.
		j.report(slog.LevelInfo, "fenced", nil)
	case err != nil:
		j.report(slog.LevelWarn, "abandoned", err)
	default:
		j.report(slog.LevelInfo, "handed_over", nil)
	}
}

// settleLater records the usage of end, the stream's end frame, and then acks
// the request, together with the other streams that end about now
// (settle.go).
func (j *job) settleLater(end wire.Frame) {
	j.w.settler.later(func() {
		j.recordUsage(end)
		j.ack()
	})
}

// ack confirms the request is done, retrying while NATS is away. If the
// ack is lost all the same, the request comes back, finds the end frame
// and is acked then; so does a job started from an offer that no delivery
// reached: the worker the queue gives it to acks it.
func (j *job) ack() {
	msg, _ := j.release()
	if msg == nil {
		return
	}
	err := j.retry().do(j.logCtx, "ack", func(ctx context.Context) error { return msg.DoubleAck(ctx) })
	if err != nil {
		j.log.Warn("ack failed", "err", err)
	}
}

// release ends the job's hold on its delivery: it stops the progress
// reports and adopts no delivery from then on. It returns the delivery, if
// any, to ack or hand over.
func (j *job) release() (ackable, wire.Delivery) {
	return j.w.jobs.release(j)
}

// report writes the job's one log line.
func (j *job) report(level slog.Level, status string, err error) {
	attrs := []slog.Attr{
		slog.String("status", status),
		slog.String("provider", j.provider),
		slog.String("model", j.model),
		slog.Int("chunks", j.chunks),
		slog.Int("attempts", j.attempts),
		slog.Float64("cost", j.cost),
		slog.Duration("duration", time.Since(j.start)),
	}
	attrs = append(attrs, j.finished(status)...)
	if err != nil {
		attrs = append(attrs, slog.Any("err", err))
	}
	j.log.LogAttrs(context.Background(), level, "job finished", attrs...)
	j.traceEnd(status, err)
}
