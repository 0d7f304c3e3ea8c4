package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"golang.org/x/sync/errgroup"
)

// startPprof serves net/http/pprof on addr (pprof_listen) until ctx ends
// and returns the address it listens on; with addr empty it serves
// nothing and returns "".
//
// The handlers go on a mux of their own, on a listener of their own: the
// import of net/http/pprof also registers them on http.DefaultServeMux,
// which no role serves, so profiles are reachable only on pprof_listen,
// never through the edge or an ops listener. The mutex and block
// profiles stay at the runtime's default rates (off), so they are empty;
// the CPU, heap, allocs, goroutine, threadcreate profiles and the
// execution trace need nothing set.
func startPprof(ctx context.Context, g *errgroup.Group, addr string, logger *slog.Logger) (string, error) {
	if addr == "" {
		return "", nil
	}
	ln, err := listen(addr, "")
	if err != nil {
		return "", fmt.Errorf("app: pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // the index, and each named profile by its name
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// No WriteTimeout: a CPU profile or a trace answers after the seconds
	// it was asked for, and pprof refuses those longer than WriteTimeout.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("app: pprof: %w", err)
		}
		return nil
	})
	// Closed, not shut down gracefully: a profile being taken is of no use
	// once the process stops, and must not hold up its exit.
	g.Go(func() error {
		<-ctx.Done()
		return srv.Close()
	})
	logger.Info("pprof listening", "addr", ln.Addr().String())
	return ln.Addr().String(), nil
}
