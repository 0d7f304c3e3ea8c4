package durable

import (
	"net/http"

	"github.com/relaydev/relay/relay/wire"
)

// Generations reads the relay's generations as Durable Streams.
type Generations interface{}

func (h *Handler) serveGeneration(w http.ResponseWriter, r *http.Request, acc Access, id string) {
	h.fail(w, &wire.Error{Message: "no generation " + id, Type: wire.TypeNotFound, Code: "stream_not_found", Status: http.StatusNotFound})
}
