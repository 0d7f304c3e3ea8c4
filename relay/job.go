package relay

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/protocol"
	"github.com/relaydev/relay/relay/upstream"
)

// job is one request being served: the stream's writer and what the job
// has done to the stream so far. It lives on one slot's goroutine.
type job struct {
	w     *Worker
	msg   jetstream.Msg
	req   protocol.Request
	log   *slog.Logger
	start time.Time

	writer *chunklog.Writer
	// text is every chunk's content in the stream so far, earlier owners'
	// included: what a continuation continues.
	text strings.Builder
	// toolCalls reports that some chunk carried tool calls; such an answer
	// is never continued.
	toolCalls bool
	// promptMode is set once a provider refused a prefill: the rest of the
	// request continues in prompt mode.
	promptMode bool
	// attempts counts upstream calls in the stream, earlier owners' included
	// as far as their chunks tell.
	attempts int
	// usage sums the usage the providers reported to this job, and cost
	// prices it by the model of each call.
	usage *protocol.Usage
	cost  float64
	// chunks counts the chunks this job appended.
	chunks int
	// provider and model are those of the latest attempt; model is what the
	// provider said it ran.
	provider, model string
}

func newJob(w *Worker, msg jetstream.Msg, req protocol.Request) *job {
	return &job{w: w, msg: msg, req: req, log: w.logger.With("stream", req.StreamID), start: time.Now()}
}

// run serves the request: it claims the stream, streams an answer (or the
// rest of an earlier owner's) and ends the stream, unless it finds the
// stream ended or loses it.
func (j *job) run(ctx context.Context) {
	h, err := readHistory(ctx, j.w.reader, j.req.StreamID)
	if err != nil {
		j.abandon(ctx, err)
		return
	}
	if h.ended {
		// A duplicate, or a redelivery whose ack was lost: nothing to do.
		j.ack(ctx)
		j.report(slog.LevelInfo, "already_ended", nil)
		return
	}
	j.attempts = h.attempts
	j.text.WriteString(h.text)
	j.toolCalls = h.toolCalls
	j.writer = chunklog.NewWriter(j.w.js, j.w.reader, j.req.StreamID, h.last, h.seq)
	if err := appendFrame(ctx, j.writer, protocol.Frame{Kind: protocol.KindClaim, Worker: j.w.id}); err != nil {
		j.abandon(ctx, err)
		return
	}
	j.end(ctx, j.serve(ctx, h.seq > 0))
}

// end appends the terminal frame for out and acknowledges the request, or
// abandons the stream if the job no longer owns it or is shutting down.
func (j *job) end(ctx context.Context, out outcome) {
	if out.logErr != nil {
		j.abandon(ctx, out.logErr)
		return
	}
	if ctx.Err() != nil {
		j.abandon(ctx, ctx.Err())
		return
	}
	f := j.endFrame(out)
	if err := appendFrame(ctx, j.writer, f); err != nil {
		j.abandon(ctx, err)
		return
	}
	j.ack(ctx)
	level := slog.LevelInfo
	if out.err != nil && out.class != upstream.RequestFault {
		// The client's own mistakes are not the relay's warnings.
		level = slog.LevelWarn
	}
	j.report(level, string(f.Status), out.err)
}

// abandon leaves the stream without a terminal frame and without acking,
// so the request goes to another worker after AckWait, which continues the
// stream. A fenced job must never ack: acks are matched by sequence only,
// and the new owner's delivery is the same message.
func (j *job) abandon(ctx context.Context, err error) {
	switch {
	case errors.Is(err, chunklog.ErrFenced):
		j.report(slog.LevelInfo, "fenced", nil)
	case ctx.Err() != nil:
		j.report(slog.LevelInfo, "shutdown", nil)
	default:
		j.report(slog.LevelWarn, "abandoned", err)
	}
}

// ack confirms the request is done. If the ack is lost the request comes
// back, finds the end frame and is acked then.
func (j *job) ack(ctx context.Context) {
	if err := j.msg.DoubleAck(ctx); err != nil {
		j.log.Warn("ack failed", "err", err)
	}
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
	if err != nil {
		attrs = append(attrs, slog.Any("err", err))
	}
	j.log.LogAttrs(context.Background(), level, "job finished", attrs...)
}
