package durable

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	store "github.com/relaydev/relay/relay/durable"
	"github.com/relaydev/relay/relay/wire"
)

// append answers POST: an append, a close, or both at once.
func (h *Handler) append(w http.ResponseWriter, r *http.Request, acc Access, path string) {
	ctx := r.Context()
	k, e := h.key(ctx)
	if e != nil {
		h.fail(w, e)
		return
	}
	producer, e := producerOf(r.Header)
	if e != nil {
		h.fail(w, e)
		return
	}
	st, e := h.open(ctx, acc, path)
	if e != nil {
		h.fail(w, e)
		return
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	a := store.Append{Close: isTrue(r.Header.Get(hClosed)), StreamSeq: r.Header.Get(hSeq), Producer: producer}
	hdr := w.Header()
	if len(body) == 0 && !a.Close {
		h.fail(w, badRequest("body", "an append needs a body (or Stream-Closed: true)"))
		return
	}
	if len(body) > 0 {
		ct := strings.TrimSpace(r.Header.Get("Content-Type"))
		if ct == "" {
			h.fail(w, badRequest("Content-Type", "an append needs its stream's Content-Type"))
			return
		}
		if store.MediaType(ct) != store.MediaType(st.ContentType) {
			// A closed stream says so first (the protocol's precedence).
			if t, err := h.deps.Store.TailOf(ctx, st); err == nil && t.Closed {
				h.closed(w, k, t.Offset)
				return
			}
			h.fail(w, &wire.Error{Message: "the stream's content type is " + st.ContentType, Type: wire.TypeInvalidRequest, Param: "Content-Type", Code: "content_type_mismatch", Status: http.StatusConflict})
			return
		}
		a.Data = body
		if store.IsJSON(st.ContentType) {
			if a.Data, a.Messages, e = messages(body, false); e != nil {
				h.fail(w, e)
				return
			}
		}
	}
	res, err := h.deps.Store.Append(ctx, st, a)
	var closed *store.ClosedError
	var pe *store.ProducerError
	switch {
	case errors.As(err, &closed):
		h.closed(w, k, closed.Tail)
		return
	case errors.As(err, &pe):
		h.producerRefused(w, pe)
		return
	case err != nil:
		h.fail(w, storeError(err))
		return
	}
	h.deps.Store.Touch(ctx, st)
	hdr.Set(hNextOffset, k.Offset(res.Tail))
	if res.Closed {
		hdr.Set(hClosed, "true")
	}
	if producer == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	hdr.Set(hProducerEpoch, strconv.FormatUint(producer.Epoch, 10))
	hdr.Set(hProducerSeq, strconv.FormatUint(res.ProducerSeq, 10))
	if res.Duplicate || len(body) == 0 {
		// A duplicate, or a close that appends nothing.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// closed refuses an append to a closed stream, with its final offset.
func (h *Handler) closed(w http.ResponseWriter, k *wire.CursorKey, tail wire.Offset) {
	w.Header().Set(hClosed, "true")
	w.Header().Set(hNextOffset, k.Offset(tail))
	h.fail(w, storeError(&store.ClosedError{Tail: tail}))
}

// producerRefused answers a producer's append the state refused.
func (h *Handler) producerRefused(w http.ResponseWriter, pe *store.ProducerError) {
	hdr := w.Header()
	status := http.StatusBadRequest
	switch pe.Verdict {
	case store.StaleEpoch:
		status = http.StatusForbidden
		hdr.Set(hProducerEpoch, strconv.FormatUint(pe.Epoch, 10))
	case store.SeqGap:
		status = http.StatusConflict
		hdr.Set(hExpectedSeq, strconv.FormatUint(pe.Expected, 10))
		hdr.Set(hReceivedSeq, strconv.FormatUint(pe.Received, 10))
	}
	h.fail(w, &wire.Error{Message: pe.Error(), Type: wire.TypeInvalidRequest, Param: hProducerSeq, Code: "producer_refused", Status: status})
}

// producerOf reads the producer headers: all three or none.
func producerOf(hdr http.Header) (*store.Producer, *wire.Error) {
	id, hasID := hdr[http.CanonicalHeaderKey(hProducerID)]
	epoch, hasEpoch := hdr[http.CanonicalHeaderKey(hProducerEpoch)]
	seq, hasSeq := hdr[http.CanonicalHeaderKey(hProducerSeq)]
	if !hasID && !hasEpoch && !hasSeq {
		return nil, nil
	}
	if !hasID || !hasEpoch || !hasSeq {
		return nil, badRequest(hProducerID, "Producer-Id, Producer-Epoch and Producer-Seq go together")
	}
	p := &store.Producer{ID: strings.TrimSpace(id[0])}
	if p.ID == "" {
		return nil, badRequest(hProducerID, "Producer-Id must not be empty")
	}
	var ok bool
	if p.Epoch, ok = parseDecimal(strings.TrimSpace(epoch[0]), maxSafeInteger); !ok {
		return nil, badRequest(hProducerEpoch, "Producer-Epoch must be a non-negative integer")
	}
	if p.Seq, ok = parseDecimal(strings.TrimSpace(seq[0]), maxSafeInteger); !ok {
		return nil, badRequest(hProducerSeq, "Producer-Seq must be a non-negative integer")
	}
	return p, nil
}
