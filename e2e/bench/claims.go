package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/wire"
)

// claimant returns the worker.id in the first claim frame of a stream: the
// worker that took it first. The harness names workers by their process,
// so this says which process to kill, or whose memory a stream occupies.
func claimant(ctx context.Context, chunks jetstream.Stream, streamID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := chunks.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(wire.ChunkSubject(streamID)))
	if err != nil {
		return "", fmt.Errorf("first frame of %s: %w", streamID, err)
	}
	f, err := wire.DecodeFrame(msg.Data)
	if err != nil {
		return "", err
	}
	if f.Kind != wire.KindClaim {
		return "", fmt.Errorf("first frame of %s is a %s frame, not a claim", streamID, f.Kind)
	}
	return f.Worker, nil
}

// claimsBudget bounds looking up the frames of a whole phase: a server
// that a failed run left overloaded must not hold the benchmark up.
const claimsBudget = 30 * time.Second
