package edge

import (
	"context"
	"errors"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// # Cancellation
//
// DELETE /v1/streams/{id}, a WebSocket cancel message and the cancel_after
// disconnect policy all cancel the same way (package wire has the
// contract):
//
//  1. The Meta must exist (404 otherwise) and belong to the caller's
//     tenant (404 too, so a foreign stream's existence is not revealed).
//  2. A stream that already ended is left alone: the answer is its
//     terminal status, "done" included, and its Meta is not touched.
//  3. Meta.Cancelled is set by a revision-checked update (the durable
//     record a worker that takes the request later reads); setting it
//     again is a no-op, so cancelling twice is harmless.
//  4. A notice goes to wire.CancelSubject(id) (the prompt signal to
//     the worker holding the stream), on every call: a repeated cancel
//     repeats a notice that may have been lost.
//  5. The edge waits up to cancelWait for the end frame the worker then
//     appends, and answers with its status, or with "cancelling" when it
//     did not appear in time (no worker holds the request yet, or the
//     worker is slow): the cancellation stands either way.

// statusCancelling answers a cancellation whose end frame did not appear
// within cancelWait. It is not a terminal status: the stream will end
// (normally "cancelled") when a worker acts on the record.
const statusCancelling wire.Status = "cancelling"

// cancelWait bounds how long a cancel request waits for the end frame:
// twice the second a worker is allowed to take to stop, so that a healthy
// cluster always answers with the end, while a request nobody holds yet
// does not keep the caller long.
const cancelWait = 2 * time.Second

// cancelObject answers DELETE /v1/streams/{id}.
type cancelObject struct {
	ID     string      `json:"id"`
	Object string      `json:"object"`
	Status wire.Status `json:"status"`
}

func newCancelObject(id string, status wire.Status) cancelObject {
	return cancelObject{ID: id, Object: "stream.cancellation", Status: status}
}

// cancelAndWait cancels stream id on behalf of tenant and waits (up to the
// server's cancelWait) for its end; it returns the terminal status, or
// statusCancelling. idParam names the id in errors.
func (s *Server) cancelAndWait(ctx context.Context, tenant, id, idParam string) (wire.Status, *wire.Error) {
	tail, e := s.cancel(ctx, tenant, id, idParam)
	if e != nil {
		return "", e
	}
	if tail.Frame.Kind == wire.KindEnd {
		return tail.Frame.Status, nil
	}
	ctx, stop := context.WithTimeout(ctx, s.cancelWait)
	defer stop()
	// From the last frame the cancel saw: nothing earlier can be the end.
	f, err := s.hub.Follow(id, tail.JSSeq, s.cfg.ClientBuffer)
	if err != nil {
		s.log.Warn("cancel: cannot watch for the end", "stream_id", id, "err", err)
		return statusCancelling, nil
	}
	defer f.Close()
	for !f.Ended() {
		entries, err := f.Next(ctx, s.cfg.Keepalive)
		for _, e := range entries {
			if e.Frame.Kind == wire.KindEnd {
				return e.Frame.Status, nil
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("cancel: watching for the end", "stream_id", id, "err", err)
			}
			break
		}
	}
	return statusCancelling, nil
}

// cancel records the cancellation of stream id and notifies its worker
// (steps 1 to 4 above). It returns the stream's last stored frame, claims
// included: the end frame when the stream had ended already (then nothing
// was changed), or where to watch for the end from (zero when nothing was
// stored yet).
func (s *Server) cancel(ctx context.Context, tenant, id, idParam string) (chunklog.Entry, *wire.Error) {
	if !wire.ValidStreamID(id) {
		return chunklog.Entry{}, invalid(idParam, CodeInvalidStreamID, "%q is not a stream id", id)
	}
	ctx, stop := context.WithTimeout(ctx, natsTimeout)
	defer stop()
	meta, revision, err := s.meta.get(ctx, id)
	switch {
	case errors.Is(err, errNoMeta):
		return chunklog.Entry{}, notFound(id, idParam)
	case err != nil:
		return chunklog.Entry{}, unavailable("reading stream metadata", err)
	case meta.Tenant != tenant:
		return chunklog.Entry{}, notFound(id, idParam)
	}
	tail, err := s.reader.LastEntry(ctx, id)
	if err != nil {
		return chunklog.Entry{}, unavailable("reading the stream's last frame", err)
	}
	if tail.Frame.Kind == wire.KindEnd {
		return tail, nil
	}
	err = s.meta.update(ctx, id, meta, revision, markCancelled)
	switch {
	case errors.Is(err, errNoMeta):
		return chunklog.Entry{}, notFound(id, idParam) // expired meanwhile
	case err != nil:
		return chunklog.Entry{}, unavailable("recording the cancellation", err)
	}
	if err := s.nc.Publish(wire.CancelSubject(id), nil); err != nil {
		// The record stands; the worker holding the stream misses the
		// notice, and a worker taking the request over reads the record.
		s.log.Warn("cancel notice not sent", "stream_id", id, "err", err)
	}
	return tail, nil
}

// markCancelled is the Meta of a cancelled stream; an already cancelled one
// needs no write.
func markCancelled(m wire.Meta) (wire.Meta, bool) {
	if m.Cancelled {
		return m, false
	}
	m.Cancelled = true
	return m, true
}
