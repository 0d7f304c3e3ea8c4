package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/wire"
)

// statusTimeout bounds the reads of one GET /v1/relay/status. A read the
// NATS server denies ends at once instead (denials.go).
const statusTimeout = 5 * time.Second

// statusBuckets are the buckets fleet.ReadStatus reads.
var statusBuckets = []string{
	wire.BreakerBucket, wire.PauseBucket, wire.HealthBucket, wire.CanaryBucket, wire.QuotaBucket, wire.LeaseBucket,
}

// handleRelayStatus serves GET /v1/relay/status: the cluster-wide provider
// state (breakers, pauses, health, quotas, canaries and the active
// coordinator) as JSON, read from the shared buckets (a region reads its
// mirror). What could not be read is named in "errors"; with nothing read
// at all, the answer is a 503. A tenant sees its own part (operator.go).
func (s *Server) handleRelayStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
	defer cancel()
	ctx, stop := s.denials.watch(ctx, mentionsBucket(statusBuckets...))
	defer stop()
	st, err := fleet.ReadStatus(ctx, s.js)
	if cause := context.Cause(ctx); errors.Is(cause, nats.ErrPermissionViolation) {
		// The reads after the denial were cut short: name the denial
		// itself, which says which grant the edge's NATS user lacks.
		err = fmt.Errorf("denied to the edge's NATS user: %w", cause)
	}
	if err != nil {
		st.Errors = append(st.Errors, err.Error())
		if st.Empty() {
			e := unavailable("reading the cluster state", err)
			if s.isOperator(principalOf(r)) {
				// An operator reads the status to fix the cluster: the
				// cause (a grant the edge lacks, say) is what to fix.
				e.Message = "The cluster state could not be read: " + err.Error()
			}
			writeError(w, e)
			return
		}
	}
	if p := principalOf(r); !s.isOperator(p) {
		st = tenantStatus(st, p.tenant)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, st)
}
