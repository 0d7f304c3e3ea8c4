package edge

import (
	"container/list"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/wire"
)

// # Connection cap
//
// Every client connection holds a goroutine and buffers, and a stream or a
// WebSocket holds its connection for minutes, so the edge caps how many it
// keeps open (edge.max_connections), and shares the cap so that no one
// client can hold all of it:
//
//   - A connection is unauthenticated from its accept until a request on
//     it authenticates (admit_auth.go), which is decided on the request's
//     headers. Unauthenticated connections have a share of their own
//     (edge.max_unauthenticated_connections, half the cap by default):
//     at the cap, while they hold that many or more, a new connection
//     closes the unauthenticated one accepted longest ago, whose client
//     has had the most time to send its headers. A flood of connections
//     that never authenticate so replaces itself, and cannot keep a
//     tenant's new connection out.
//   - A tenant's share is edge.max_connections_per_tenant, half the cap by
//     default on an edge that serves more than one tenant. A request whose
//     tenant already holds its share on other connections gets a 429 with
//     Retry-After and its connection is closed: one tenant's streams, or
//     requests waiting for their turn, leave room for the others.
//   - At the cap, a connection that only waits for its client's next
//     request (keep-alive) is closed to make room for a new one, the one
//     idle longest, as nginx does: a client that holds an idle connection
//     loses nothing it cannot get back by dialling again, where one
//     refused would have to retry. Only when none is idle is one over the
//     cap refused. It is not left waiting in the kernel's backlog, where a
//     client cannot tell a full edge from a dead one: it gets a 503 in
//     OpenAI's shape with Retry-After, so a load balancer or SDK retries
//     elsewhere, and is closed.
//
// The ops listener (edge.ops_listen, health.go) is not capped: its
// /healthz answers however full the API's listener is.

// CodeTooManyConnections answers a connection over edge.max_connections,
// and a request whose tenant holds its share of it.
const CodeTooManyConnections = "too_many_connections"

// refuseWriteTimeout bounds the write of the refusal, so that a client
// that does not read cannot hold the accept loop.
const refuseWriteTimeout = 100 * time.Millisecond

// capListener accepts at most max connections at a time, of which at most
// unauthenticated are not yet claimed by a tenant, and lets a tenant claim
// at most perTenant (0: no bound).
type capListener struct {
	net.Listener
	max, unauthenticated, perTenant int
	refusal                         []byte
	// reclaim, if set, closes an idle connection, which gives its slot
	// back at once, and reports whether it found one.
	reclaim func() bool

	mu    sync.Mutex
	total int
	// fresh holds the unauthenticated connections, the one accepted
	// longest ago first.
	fresh   list.List
	tenants map[string]int
}

// connShares are the bounds of a capListener, from the edge's
// configuration.
type connShares struct {
	max, unauthenticated, perTenant int
}

// sharesOf resolves cfg's connection settings (after WithDefaults): a
// share's zero is half the cap, at least one connection; the tenants'
// applies only to an edge with more than one tenant (keys of several
// tenants, or one and anonymous requests); a negative share, or one over
// the cap, is the cap.
func sharesOf(cfg Config) connShares {
	half := max(cfg.MaxConnections/2, 1)
	sh := connShares{max: cfg.MaxConnections, unauthenticated: cfg.MaxUnauthenticatedConnections, perTenant: cfg.MaxConnectionsPerTenant}
	if sh.unauthenticated == 0 {
		sh.unauthenticated = half
	}
	if sh.perTenant == 0 && tenantCount(cfg) > 1 {
		sh.perTenant = half
	}
	if sh.unauthenticated < 0 || sh.unauthenticated > sh.max {
		sh.unauthenticated = sh.max
	}
	if sh.perTenant < 0 || sh.perTenant >= sh.max {
		sh.perTenant = 0
	}
	return sh
}

// tenantCount is how many tenants the edge serves: the tenants of its
// keys, and the anonymous one if it serves anonymous requests.
func tenantCount(cfg Config) int {
	tenants := map[string]bool{}
	for _, k := range cfg.APIKeys {
		tenants[k.Tenant] = true
	}
	if cfg.AllowAnonymous || len(cfg.APIKeys) == 0 {
		tenants[""] = true
	}
	return len(tenants)
}

// limitConnections wraps ln with the cap, or returns nil for a negative
// max (no cap); reclaim is capListener.reclaim.
func limitConnections(ln net.Listener, sh connShares, reclaim func() bool) *capListener {
	if sh.max < 0 {
		return nil
	}
	return &capListener{Listener: ln, max: sh.max, unauthenticated: sh.unauthenticated, perTenant: sh.perTenant,
		refusal: refusal(sh.max), reclaim: reclaim, tenants: map[string]int{}}
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
		sc := &slotConn{Conn: c, l: l}
		if l.admit(sc) {
			return sc, nil
		}
		c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
		c.Write(l.refusal)
		c.Close()
	}
}

// admit counts c in, unauthenticated, if it finds room. Below the cap
// there is room. At the cap, room is made by closing the oldest
// unauthenticated connection while they hold their share or more, else an
// idle one. So a burst of clients below the cap loses no connection while
// its clients send their headers.
func (l *capListener) admit(c *slotConn) bool {
	l.mu.Lock()
	var oldest *slotConn
	if l.unauthenticated < l.max && l.total >= l.max && l.fresh.Len() >= l.unauthenticated {
		oldest = l.fresh.Remove(l.fresh.Front()).(*slotConn)
		oldest.fresh = nil
	}
	l.mu.Unlock()
	if oldest != nil {
		oldest.Close()
	}
	if l.take(c) || l.reclaim != nil && l.reclaim() && l.take(c) {
		return true
	}
	return false
}

// take counts c in if the cap has room.
func (l *capListener) take(c *slotConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= l.max {
		return false
	}
	l.total++
	c.fresh = l.fresh.PushBack(c)
	return true
}

// claim counts c as tenant's, unless the tenant holds its share on other
// connections.
func (l *capListener) claim(c *slotConn, tenant string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released || c.claimed && c.tenant == tenant {
		return true
	}
	if l.perTenant > 0 && l.tenants[tenant] >= l.perTenant {
		return false
	}
	l.leave(c)
	c.claimed, c.tenant = true, tenant
	l.tenants[tenant]++
	return true
}

// release gives c's slot back.
func (l *capListener) release(c *slotConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	l.total--
	l.leave(c)
}

// leave takes c out of the share it is counted in; l.mu is held.
func (l *capListener) leave(c *slotConn) {
	if c.fresh != nil {
		l.fresh.Remove(c.fresh)
		c.fresh = nil
	}
	if c.claimed {
		if l.tenants[c.tenant]--; l.tenants[c.tenant] == 0 {
			delete(l.tenants, c.tenant)
		}
		c.claimed = false
	}
}

// slotConn gives its slot back when closed, however often it is closed
// (http.Server and a hijacking handler may both close it). Its fields
// but Conn and l are l.mu's.
type slotConn struct {
	net.Conn
	l *capListener
	// fresh is c's place among the unauthenticated connections, nil once
	// claimed or closed.
	fresh    *list.Element
	claimed  bool
	tenant   string
	released bool
}

func (c *slotConn) Close() error {
	c.l.release(c)
	return c.Conn.Close()
}

// NetConn is the connection wrapped, as tls.Conn's is: the hang-up watch
// (serve_hangup_linux.go) reaches the socket through it, where a waiting SSE
// stream would otherwise need a goroutine reading its connection.
func (c *slotConn) NetConn() net.Conn { return c.Conn }

type connKey struct{}

// withConn is the server's http.Server.ConnContext: it keeps a request's
// connection within reach of the authentication, which claims it.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// claimConn counts r's connection as tenant's (capListener.claim), and
// reports false when the tenant holds its share already. A connection the
// cap does not count (no cap, a server the handler is mounted on) is
// anyone's.
func claimConn(r *http.Request, tenant string) bool {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	for c != nil {
		if sc, ok := c.(*slotConn); ok {
			return sc.l.claim(sc, tenant)
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	return true
}

// tenantConnections refuses a request whose tenant holds its share of the
// edge's connections.
func (s *Server) tenantConnections() *wire.Error {
	return &wire.Error{
		Message: fmt.Sprintf("your tenant holds %d connections to this edge, its share of them (edge.max_connections_per_tenant); "+
			"retry once one of them closed, or on another edge", s.conns.perTenant),
		Type:         "requests",
		Code:         CodeTooManyConnections,
		Status:       http.StatusTooManyRequests,
		RetryAfterMS: time.Second.Milliseconds(),
	}
}
