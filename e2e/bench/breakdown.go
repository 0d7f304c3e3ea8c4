package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// breakdownSamples is how many streams of a load are split into stages.
const breakdownSamples = 200

// timedStream is what the client saw of one measured relay stream.
type timedStream struct {
	id                   string
	start, opened, first time.Time
}

// ttftBreakdown splits the relay's time to first token into stages, for
// up to breakdownSamples of the streams, evenly spread: the client's
// response headers (the edge stored the Meta and queued the request),
// the claim frame stored (the queue, the worker's pull, its claim), the
// first chunk stored (the upstream call), and the first token at the
// client (the republish, the edge, the client). The stored times are the
// times JetStream gave the frames, on the same clock as the client's.
// Each stage is the median and p99 of the time since the request was
// sent, in ms. js is the server the relay stored the streams in.
func ttftBreakdown(ctx context.Context, js jetstream.JetStream, streams []timedStream) string {
	if len(streams) == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, claimsBudget)
	defer cancel()
	chunks, err := js.Stream(ctx, wire.ChunkStream)
	if err != nil {
		return "breakdown: " + err.Error()
	}
	step := max(1, len(streams)/breakdownSamples)
	var headers, claim, stored, client []time.Duration
	for i := 0; i < len(streams); i += step {
		s := streams[i]
		c, first, err := firstFrames(ctx, chunks, s.id)
		if err != nil {
			return "breakdown: " + err.Error()
		}
		headers = append(headers, s.opened.Sub(s.start))
		claim = append(claim, c.Sub(s.start))
		stored = append(stored, first.Sub(s.start))
		client = append(client, s.first.Sub(s.start))
	}
	parts := []string{}
	for _, st := range []struct {
		name string
		d    []time.Duration
	}{{"response headers", headers}, {"claim stored", claim}, {"first chunk stored", stored}, {"first token at the client", client}} {
		d := summarize(ms(st.d))
		parts = append(parts, fmt.Sprintf("%s %s · p99 %s", st.name, num(d.Median), num(d.P99)))
	}
	return fmt.Sprintf("since the request was sent, ms (median · p99 of %d streams): %s", len(headers), strings.Join(parts, "; "))
}

// firstFrames returns when the claim frame and the first chunk of a stream
// were stored.
func firstFrames(ctx context.Context, chunks jetstream.Stream, id string) (claim, first time.Time, err error) {
	subject := wire.ChunkSubject(id)
	c, err := chunks.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subject))
	if err != nil {
		return claim, first, fmt.Errorf("claim of %s: %w", id, err)
	}
	f, err := chunks.GetMsg(ctx, c.Sequence+1, jetstream.WithGetMsgSubject(subject))
	if err != nil {
		return claim, first, fmt.Errorf("first chunk of %s: %w", id, err)
	}
	return c.Time, f.Time, nil
}
