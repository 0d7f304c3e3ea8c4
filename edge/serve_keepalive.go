package edge

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// # Keep-alive after a taken-over stream
//
// A taken-over SSE response (serve_sse_conn.go) is no longer net/http's, and
// net/http cannot be handed a hijacked connection back. Answering
// "Connection: close" would make every streamed request open a connection
// of its own: a TCP handshake, and through a TLS terminator a TLS one too,
// on the way to every first token, and an accept and a close on the edge
// for every request. So the edge's listener takes a connection back once
// its stream ended cleanly, and net/http serves the client's next request
// on it as it would on a new connection; its next read is bounded by the
// server's ReadHeaderTimeout rather than its IdleTimeout. net/http's
// Shutdown waits for a new connection until it is 5 s old, so the
// listener closes the connections given back that wait for their next
// request when it is closed, which is the first thing Shutdown does.
//
// A connection is given back only if nothing of it is lost: the request's
// body was read to its end and net/http had buffered nothing after it, so
// that the client's next bytes are its next request, still in the socket;
// the client did not ask for the connection to close; and the hang-up is
// watched without reading the connection (serve_hangup_linux.go). Otherwise the
// response says "Connection: close" as before.

// reuseListener is the edge's listener in Serve: it accepts new
// connections and the connections that taken-over streams give back. Each
// new one is a keptConn, which names the listener to give it back to; a
// connection of another server the handler is mounted on is not one.
type reuseListener struct {
	net.Listener
	accepted chan acceptResult
	back     chan *keptConn
	// closed is closed with the listener: a connection given back after
	// that is closed instead.
	closed    chan struct{}
	closeOnce sync.Once
	pumpOnce  sync.Once
	// waiting holds the connections given back that have not sent their
	// next request (connState), which Close closes; idle holds those and
	// the ones net/http keeps alive between requests, with when they
	// became idle, for the connection cap to reclaim (reclaimIdle).
	mu      sync.Mutex
	waiting map[*keptConn]struct{}
	idle    map[*keptConn]time.Time
}

type acceptResult struct {
	conn net.Conn
	err  error
}

func newReuseListener(ln net.Listener) *reuseListener {
	return &reuseListener{Listener: ln, accepted: make(chan acceptResult), back: make(chan *keptConn), closed: make(chan struct{}),
		waiting: map[*keptConn]struct{}{}, idle: map[*keptConn]time.Time{}}
}

// Accept returns the next connection, new or given back.
func (l *reuseListener) Accept() (net.Conn, error) {
	l.pumpOnce.Do(func() { go l.pump() })
	select {
	case c := <-l.back:
		return c, nil
	case a := <-l.accepted:
		if a.err != nil {
			return nil, a.err
		}
		return &keptConn{Conn: a.conn, l: l}, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// pump accepts new connections for Accept, one at a time, until the
// listener is closed; Serve decides what other errors mean.
func (l *reuseListener) pump() {
	for {
		c, err := l.Listener.Accept()
		select {
		case l.accepted <- acceptResult{c, err}:
		case <-l.closed:
			if c != nil {
				c.Close()
			}
			return
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

// Close stops accepting, and closes the connections given back that wait
// for their next request.
func (l *reuseListener) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		close(l.closed)
		for c := range l.waiting {
			c.Close()
		}
		clear(l.waiting)
		clear(l.idle)
	})
	return l.Listener.Close()
}

// connState is the server's http.Server.ConnState: a connection given back
// stops waiting once net/http reads its next request, or lets it go; one
// kept alive between requests is idle until its next.
func (l *reuseListener) connState(c net.Conn, st http.ConnState) {
	kc, ok := c.(*keptConn)
	if !ok || st == http.StateNew {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiting, kc)
	if st == http.StateIdle {
		l.idle[kc] = time.Now()
	} else {
		delete(l.idle, kc)
	}
}

// reclaimIdle closes the connection idle longest, if any, and reports
// whether it did (admit_conn_limit.go). A client that sends its next request
// at that very moment sees the connection close, as it would at the end
// of an idle timeout; HTTP clients retry that on a new one.
func (l *reuseListener) reclaimIdle() bool {
	l.mu.Lock()
	var oldest *keptConn
	var since time.Time
	for c, at := range l.idle {
		if oldest == nil || at.Before(since) {
			oldest, since = c, at
		}
	}
	delete(l.idle, oldest)
	delete(l.waiting, oldest)
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.Close()
	return true
}

// keptConn is a connection the edge's listener accepted.
type keptConn struct {
	net.Conn
	l *reuseListener
}

// NetConn is the connection wrapped: the hang-up watch reaches the socket
// through it (serve_hangup_linux.go).
func (c *keptConn) NetConn() net.Conn { return c.Conn }

// giveBack hands c to the server for the client's next request, with no
// deadline left on it, or closes it if the server stopped accepting.
func (c *keptConn) giveBack() {
	if c.SetDeadline(time.Time{}) != nil || !c.l.wait(c) {
		c.Close()
		return
	}
	select {
	case c.l.back <- c:
	case <-c.l.closed: // Close closed c
	}
}

// wait counts c among the connections waiting for their next request,
// unless the listener was closed.
func (l *reuseListener) wait(c *keptConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closed:
		return false
	default:
	}
	l.waiting[c] = struct{}{}
	l.idle[c] = time.Now()
	return true
}

// reusable returns the connection a taken-over response to r is written
// on if it can serve the client's next request (see above), else nil:
// buffered is what net/http had read past the request.
func reusable(conn net.Conn, r *http.Request, buffered int) *keptConn {
	kc, ok := conn.(*keptConn)
	if !ok || !canWatchHangup || r.Close || buffered > 0 || !bodyRead(r) {
		return nil
	}
	return kc
}

// bodyRead reports whether r's body was read to its end: a read of
// nothing then answers io.EOF, and reads nothing from the connection in
// any case.
func bodyRead(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	n, err := r.Body.Read(nil)
	return n == 0 && err == io.EOF
}
