package edge

import (
	"context"
	"net/http"
	"strconv"

	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/streams"
)

// handleHealth reports that the process serves HTTP; it checks nothing
// else, so a NATS outage does not get the edge restarted.
func handleHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

// handleReady reports whether the edge can accept requests: it is not
// draining, NATS is connected and the streams and bucket exist.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), natsTimeout)
	defer cancel()
	var err error
	if s.clients.draining() {
		err = errShuttingDown
	}
	if err == nil {
		err = natsconn.Ready(s.nc)
	}
	if err == nil {
		err = streams.Check(ctx, s.js)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err != nil {
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(unavailableRetry), 10))
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(err.Error() + "\n"))
		return
	}
	w.Write([]byte("ok\n"))
}
