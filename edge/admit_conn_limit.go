package edge

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// # Connection cap
//
// Every client connection holds a goroutine and buffers, and a stream or a
// WebSocket holds its connection for minutes, so the edge caps how many it
// keeps open (edge.max_connections). At the cap, a connection that only
// waits for its client's next request (keep-alive) is closed to make room
// for a new one, the one idle longest, as nginx does: a client that holds
// an idle connection loses nothing it cannot get back by dialling again,
// where one refused would have to retry. Only when none is idle is one
// over the cap refused. It is not left waiting in the kernel's backlog,
// where a client cannot tell a full edge from a dead one: it gets a 503 in
// OpenAI's shape with Retry-After, so a load balancer or SDK retries
// elsewhere, and is closed.

// CodeTooManyConnections answers a connection over edge.max_connections.
const CodeTooManyConnections = "too_many_connections"

// refuseWriteTimeout bounds the write of the refusal, so that a client
// that does not read cannot hold the accept loop.
const refuseWriteTimeout = 100 * time.Millisecond

// capListener accepts at most max connections at a time.
type capListener struct {
	net.Listener
	slots   chan struct{}
	refusal []byte
	// reclaim, if set, closes an idle connection, which gives its slot
	// back at once, and reports whether it found one.
	reclaim func() bool
}

// limitConnections wraps ln with the cap, or returns nil for max < 0 (no
// cap); reclaim is capListener.reclaim.
func limitConnections(ln net.Listener, max int, reclaim func() bool) *capListener {
	if max < 0 {
		return nil
	}
	return &capListener{Listener: ln, slots: make(chan struct{}, max), refusal: refusal(max), reclaim: reclaim}
}

// refusal is the whole HTTP response to a connection over the cap.
func refusal(max int) []byte {
	e := &wire.Error{
		Message: fmt.Sprintf("the edge has %d open connections, its limit; retry shortly or on another edge", max),
		Type:    wire.TypeServer,
		Code:    CodeTooManyConnections,
	}
	body := append(marshal(struct {
		Error chat.Error `json:"error"`
	}{chat.ErrorOf(e)}), '\n')
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"+
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.take() || l.reclaim != nil && l.reclaim() && l.take() {
			return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
		}
		c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
		c.Write(l.refusal)
		c.Close()
	}
}

// take takes a slot if one is free.
func (l *capListener) take() bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// slotConn gives its slot back when closed, once however often it is
// closed (http.Server and a hijacking handler may both close it).
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.free)
	return c.Conn.Close()
}

// NetConn is the connection wrapped, as tls.Conn's is: the hang-up watch
// (serve_hangup_linux.go) reaches the socket through it, where a waiting SSE
// stream would otherwise need a goroutine reading its connection.
func (c *slotConn) NetConn() net.Conn { return c.Conn }
