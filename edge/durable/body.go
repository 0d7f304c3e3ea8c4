package durable

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"

	"github.com/relaydev/relay/relay/wire"
)

// maxRefusedBytes bounds what the edge reads and discards of a body it
// refused as too large.
const maxRefusedBytes = 64 << 20

// readBody reads a PUT's or POST's body, at most MaxAppendBytes; ok is
// false when it answered the request itself: a 413 past the bound, a 400
// for a body that could not be read.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxAppendBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.refuseBody(w, r, &wire.Error{Message: "the body is larger than " + strconv.FormatInt(h.cfg.MaxAppendBytes, 10) + " bytes",
			Type: wire.TypeInvalidRequest, Code: "body_too_large", Status: http.StatusRequestEntityTooLarge})
		return nil, false
	case err != nil:
		h.fail(w, &wire.Error{Message: "the body could not be read", Type: wire.TypeInvalidRequest, Code: "invalid_body", Status: http.StatusBadRequest})
		return nil, false
	}
	return body, true
}

// refuseBody answers e to a request whose body is still coming, then
// reads and discards the rest (up to maxRefusedBytes, within the body's
// deadline) before the connection closes. Closed under a body still
// being sent, the connection would be reset, and a client that writes its
// whole body before it reads (Go's http.Transport) would see the reset
// and not the answer.
func (h *Handler) refuseBody(w http.ResponseWriter, r *http.Request, e *wire.Error) {
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	w.Header().Set("Connection", "close")
	h.fail(w, e)
	_ = rc.Flush()
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxRefusedBytes))
}

// messages splits a JSON stream's body into its messages, one level of a
// top-level array flattened, and returns them joined by commas (as they
// are stored) with their count. An empty array is allowed only where
// empty is (a PUT).
func messages(body []byte, emptyOK bool) ([]byte, int, *wire.Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, 0, nil
	}
	if !json.Valid(body) {
		return nil, 0, badRequest("body", "the body is not valid JSON")
	}
	trimmed := bytes.TrimSpace(body)
	if trimmed[0] != '[' {
		var b bytes.Buffer
		if err := json.Compact(&b, trimmed); err != nil {
			return nil, 0, badRequest("body", "the body is not valid JSON")
		}
		return b.Bytes(), 1, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(trimmed, &items); err != nil {
		return nil, 0, badRequest("body", "the body is not valid JSON")
	}
	if len(items) == 0 {
		if emptyOK {
			return nil, 0, nil
		}
		return nil, 0, badRequest("body", "an empty JSON array appends nothing")
	}
	var b bytes.Buffer
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := json.Compact(&b, it); err != nil {
			return nil, 0, badRequest("body", "the body is not valid JSON")
		}
	}
	return b.Bytes(), len(items), nil
}

// decimal is the protocol's non-negative integer: no sign, no leading
// zero, no fraction or exponent.
var decimal = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// maxSafeInteger is JavaScript's, the bound of producer epochs and
// sequences.
const maxSafeInteger = 1<<53 - 1

// parseDecimal parses a protocol integer no larger than max.
func parseDecimal(s string, max uint64) (uint64, bool) {
	if !decimal.MatchString(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && n <= max
}
