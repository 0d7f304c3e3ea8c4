package edge

import (
	"context"
	"errors"
	"sync"
)

// errShuttingDown is the cause of every live client's context when the edge
// stops: each is told to reconnect (serve_drain.go) and resumes on another edge.
var errShuttingDown = errors.New("edge: shutting down; resume from the last cursor")

// clientKind says how a client is connected.
type clientKind int

const (
	clientSSE clientKind = iota
	// clientUnary waits for a whole answer ("stream": false).
	clientUnary
	clientWS
)

// clients keeps track of live streaming connections, so that shutting down
// can end them (http.Server.Shutdown does not wait for SSE responses that
// never go idle, nor see hijacked WebSockets) and wait until they are gone.
type clients struct {
	mu     sync.Mutex
	live   map[*client]struct{}
	closed bool
	// gone is closed once closed is set and the last client left.
	gone chan struct{}
	// stop is closed with closed set, for those who wait on a channel.
	stop chan struct{}
}

type client struct {
	kind   clientKind
	cancel context.CancelCauseFunc
}

func newClients() *clients {
	return &clients{live: map[*client]struct{}{}, gone: make(chan struct{}), stop: make(chan struct{})}
}

// add registers a client for as long as it is served. Its context is
// cancelled with errShuttingDown when the edge stops, at once if it already
// has. The caller must call the returned function when the client is done.
func (c *clients) add(parent context.Context, kind clientKind) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	cl := &client{kind: kind, cancel: cancel}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cancel(errShuttingDown)
		return ctx, func() {}
	}
	c.live[cl] = struct{}{}
	return ctx, func() {
		cancel(context.Canceled)
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.live, cl)
		if c.closed && len(c.live) == 0 {
			close(c.gone)
		}
	}
}

// draining reports whether close was called: the edge is shutting down.
func (c *clients) draining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// stopping is closed once close was called.
func (c *clients) stopping() <-chan struct{} { return c.stop }

// count is how many clients of kind are live.
func (c *clients) count(kind clientKind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for cl := range c.live {
		if cl.kind == kind {
			n++
		}
	}
	return n
}

// close ends every live client and refuses new ones. It is idempotent.
func (c *clients) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	close(c.stop)
	for cl := range c.live {
		cl.cancel(errShuttingDown)
	}
	if len(c.live) == 0 {
		close(c.gone)
	}
}

// wait returns when every client is gone, or ctx.Err() when time ran out.
func (c *clients) wait(ctx context.Context) error {
	select {
	case <-c.gone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
