package edge

import (
	"net/http"

	"github.com/relaydev/relay/relay/wire"
)

// handleCancel serves DELETE /v1/streams/{id} (cancel.go): 200 with the
// terminal status once the stream ended, "cancelled" or, for a stream that
// had ended before and was left alone, however it ended; 202 with status
// "cancelling" when the cancellation is recorded but the end did not
// appear within cancelWait. Another tenant's stream answers 404, as an
// unknown one.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	status, e := s.cancelAndWait(r.Context(), principalOf(r).tenant, id, "id")
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, cancelHTTPStatus(status), newCancelObject(id, status))
}

// cancelHTTPStatus answers a cancellation: 200 once the stream ended, 202
// while it is cancelling.
func cancelHTTPStatus(status wire.Status) int {
	if status == statusCancelling {
		return http.StatusAccepted
	}
	return http.StatusOK
}
