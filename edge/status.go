package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/relaydev/relay/relay/fleet"
)

// statusTimeout bounds the reads of one GET /v1/relay/status.
const statusTimeout = 5 * time.Second

// handleRelayStatus serves GET /v1/relay/status: the cluster-wide provider
// state (breakers, pauses, health, quotas, canaries and the active
// coordinator) as JSON, read from the shared buckets (a region reads its
// mirror). What could not be read is named in "errors"; with nothing read
// at all, the answer is a 503. A tenant sees its own part (operator.go).
func (s *Server) handleRelayStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
	defer cancel()
	st, err := fleet.ReadStatus(ctx, s.js)
	if err != nil {
		st.Errors = append(st.Errors, err.Error())
		if st.Empty() {
			writeError(w, unavailable("reading the cluster state", err))
			return
		}
	}
	if p := principalOf(r); !s.isOperator(p) {
		st = tenantStatus(st, p.tenant)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, st)
}
