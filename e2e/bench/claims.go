package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/protocol"
)

// claimant returns the worker.id in the first claim frame of a stream: the
// worker that took it first. The harness names workers by their process,
// so this says which process to kill, or whose memory a stream occupies.
func claimant(ctx context.Context, chunks jetstream.Stream, streamID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := chunks.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(protocol.ChunkSubject(streamID)))
	if err != nil {
		return "", fmt.Errorf("first frame of %s: %w", streamID, err)
	}
	f, err := protocol.DecodeFrame(msg.Data)
	if err != nil {
		return "", err
	}
	if f.Kind != protocol.KindClaim {
		return "", fmt.Errorf("first frame of %s is a %s frame, not a claim", streamID, f.Kind)
	}
	return f.Worker, nil
}

// claimsBudget bounds looking up the claims of a whole phase: a server
// that a failed run left overloaded must not hold the benchmark up.
const claimsBudget = 30 * time.Second

// claimants counts the streams each worker claimed first, looking them up
// with a few concurrent direct gets, for at most claimsBudget. Streams
// without an id (never opened) are skipped; streams no worker claimed
// count under "unclaimed", and those not looked up in time under
// "unknown".
func claimants(ctx context.Context, chunks jetstream.Stream, ids []string) map[string]int {
	ctx, cancel := context.WithTimeout(ctx, claimsBudget)
	defer cancel()
	counts := map[string]int{}
	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for id := range work {
				w, err := claimant(ctx, chunks, id)
				switch {
				case errors.Is(err, jetstream.ErrMsgNotFound):
					w = "unclaimed"
				case err != nil:
					w = "unknown"
				}
				mu.Lock()
				counts[w]++
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		if id != "" {
			work <- id
		}
	}
	close(work)
	wg.Wait()
	return counts
}
