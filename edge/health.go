package edge

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus/promhttp"

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

// ServeOps serves /healthz, /readyz and /metrics on ln until ctx is done:
// the edge's ops listener (edge.ops_listen). It shares nothing with the
// API's listener, neither its connection cap nor its authentication, so
// a probe or a scrape is answered however many connections the API holds;
// it is meant for a loopback or pod-local address, as the other roles'
// ops listeners are, which is why its /metrics asks for no key.
func (s *Server) ServeOps(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("/healthz", methods{http.MethodGet: handleHealth})
	mux.Handle("/readyz", methods{http.MethodGet: s.handleReady})
	mux.Handle("/metrics", methods{http.MethodGet: promhttp.HandlerFor(s.obs.gatherer, promhttp.HandlerOpts{}).ServeHTTP})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("edge: serve ops: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-served
	return err
}
