package worker

import (
	"context"
	"errors"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/upstream"
)

// runFirst serves a first delivery with its upstream call started while
// its claim frame is being stored (see run for why), and the stream's
// metadata read. Nothing is published before the claim is stored: every
// frame is chained on it (wire "Fencing"), so the publisher of a call
// waits for the go-ahead (firstClaim) while the tokens that come meanwhile
// queue in it, and the end frame waits as well.
//
// If the claim fails, the call is cancelled at once and what it received
// is dropped: a claim fenced by a frame already stored (a request queued
// twice) makes runFirst return false, and run then reads the stream and
// claims it as a redelivery does; any other failure abandons the stream. A
// stream its client cancelled before the job started stops the call too
// and ends cancelled, with no chunk.
func (j *job) runFirst() bool {
	ctx, stopEarly := context.WithCancelCause(j.callCtx)
	defer stopEarly(nil)
	claim := j.startClaim(stopEarly)
	return j.endFirst(claim, j.serve(ctx, false))
}

// startClaim starts storing the claim frame of a first delivery and
// checking that its stream was not cancelled, on the worker's runners; a
// failure stops the call with stop. It returns the go-ahead the
// publishers wait for.
func (j *job) startClaim(stop context.CancelCauseFunc) *firstClaim {
	j.takeOver(&history{})
	claim := &firstClaim{stored: make(chan struct{})}
	j.firstClaim = claim
	// The call goes on the job's goroutine, the claim on another: the call
	// is on the first token's path, the claim only has to be stored before
	// the first chunk, which comes a provider's time to first token later.
	j.w.runners.Run(func() {
		// No client knows the id of a request taken from an offer yet:
		// nothing can have cancelled it.
		var cancelled <-chan bool
		if !j.offered {
			cancelled = j.checkCancelled()
		}
		err := j.appendClaim()
		j.answerOffer(err == nil)
		if err == nil && cancelled != nil && <-cancelled {
			err = errCancelled
		}
		if err != nil {
			stop(err)
		}
		claim.done(err)
	})
	return claim
}

// answerOffer answers the offer the job was started from, if any: with
// the worker's instance once its claim is stored, so that the edge queues
// the request naming this worker and stores no Meta record (the claim
// carries it), and with nothing when the claim failed.
func (j *job) answerOffer(claimed bool) {
	if j.offer == nil {
		return
	}
	var data []byte
	if claimed {
		data = []byte(j.w.instance)
	}
	j.w.answer(j.offer, data)
	j.offer = nil
}

// endFirst ends the stream of a first delivery whose answer ended with
// out, once its claim is known, and reports whether it did: false if the
// claim was fenced.
func (j *job) endFirst(claim *firstClaim, out outcome) bool {
	err := claim.wait()
	j.firstClaim = nil
	switch {
	case errors.Is(err, chunklog.ErrFenced):
		return false
	case errors.Is(err, errCancelled):
		j.stopCall(errCancelled)
		j.end(outcome{err: errCancelled, class: upstream.Canceled})
	case err != nil:
		j.abandon(err)
	default:
		j.end(out)
	}
	return true
}

// firstClaim is the go-ahead of a first delivery's publishers: stored is
// closed once the claim frame is stored and the stream found not
// cancelled, or once the claim failed or the stream was found cancelled.
// Until then the job's writer is the claim's: others may read only its
// Seq, which a claim does not change.
type firstClaim struct {
	stored chan struct{}
	// err is set before stored is closed: nil, the claim's error, or
	// errCancelled.
	err error
}

func (c *firstClaim) done(err error) {
	c.err = err
	close(c.stored)
}

// wait returns the claim's result once it is known; a nil claim is one
// stored before the job called anyone.
func (c *firstClaim) wait() error {
	if c == nil {
		return nil
	}
	<-c.stored
	return c.err
}
