package edge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaydev/relay/edge/follow"
	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// goroutinesIn counts the goroutines whose stack has a frame of each
// function named.
func goroutinesIn(t *testing.T, funcs ...string) map[string]int {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for stack := range strings.SplitSeq(b.String(), "\n\n") {
		for _, f := range funcs {
			if strings.Contains(stack, f+"(") {
				n[f]++
			}
		}
	}
	return n
}

// TestWaitingSSEStreamsHoldNoGoroutine: SSE clients waiting for the next
// token hold no handler goroutine and no goroutine serving them, and on
// Linux none reading their connection either; a token wakes them all, the
// end frame ends them, and no goroutine is left.
func TestWaitingSSEStreamsHoldNoGoroutine(t *testing.T) {
	const clients = 50
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(2), gate: make(chan struct{})})
	edge := e.startEdge(Config{})
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	id := res.Header.Get("X-Relay-Stream-Id")

	bodies := []*bufio.Reader{bufio.NewReader(res.Body)}
	for range clients - 1 {
		bodies = append(bodies, bufio.NewReader(do(t, "GET", edge.url+"/v1/streams/"+id, "", nil).Body))
	}
	for _, r := range bodies {
		readEvents(t, r, func(ev sseEvent) bool { return ev.Retry != "" })
	}
	const (
		handler = "github.com/relaydev/relay/edge.(*Server).serveSSE"
		reader  = "github.com/relaydev/relay/edge.(*sseConn).watch"
		runner  = "github.com/relaydev/relay/edge.(*sseConn).run"
	)
	readers := 0
	if runtime.GOOS != "linux" {
		readers = clients
	}
	waitFor(t, func() bool {
		n := goroutinesIn(t, handler, reader, runner)
		return n[handler] == 0 && n[runner] == 0 && n[reader] == readers
	})

	w.gate <- struct{}{}
	for _, r := range bodies {
		if got := readEvents(t, r, func(ev sseEvent) bool { return ev.ID != "" }); len(got) != 1 {
			t.Fatalf("first token: %+v", got)
		}
	}
	close(w.gate)
	for _, r := range bodies {
		var rest strings.Builder
		if _, err := r.WriteTo(&rest); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(rest.String(), "data: [DONE]\n\n") || len(frameEvents(parseSSE(t, rest.String()))) != 2 {
			t.Fatalf("after the first token: %q", rest.String())
		}
	}
	waitFor(t, func() bool {
		n := goroutinesIn(t, reader, runner)
		return n[reader] == 0 && n[runner] == 0 && edge.clients.count(clientSSE) == 0
	})
}

// TestWaitingSSEStreamKeepsAlive: a stream with nothing new gets a
// keepalive every Keepalive, from the follower's timer.
func TestWaitingSSEStreamKeepsAlive(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(1), gate: make(chan struct{})})
	edge := e.startEdge(Config{Keepalive: 20 * time.Millisecond})
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	r := bufio.NewReader(res.Body)
	for range 3 {
		readEvents(t, r, func(ev sseEvent) bool { return ev.Comment == "keepalive" })
	}
}

// TestSSEOverTLS: an HTTP/2 connection cannot be taken over, its handler
// serves the stream; an HTTP/1.1 one over TLS is taken over. The server
// here is not the edge's own (Serve), which could take the connection
// back, so the response says Connection: close.
func TestSSEOverTLS(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(5), pace: time.Millisecond})
	edge := e.startEdge(Config{})
	for _, h2 := range []bool{true, false} {
		ts := httptest.NewUnstartedServer(edge.Handler())
		ts.EnableHTTP2 = h2
		ts.StartTLS()
		defer ts.Close()
		res, err := ts.Client().Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody(true, "hi")))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if h2 && res.ProtoMajor != 2 || !h2 && (res.ProtoMajor != 1 || !res.Close) {
			t.Fatalf("HTTP/2 %v: protocol %s, Connection: close %v", h2, res.Proto, res.Close)
		}
		if got := checkAnswer(t, readAll(t, res), 5); got != words(5) {
			t.Fatalf("HTTP/2 %v: text %q", h2, got)
		}
	}
}

// TestSSEClientThatLeavesIsNoticedAtOnce: what a client sends after its
// request is dropped (the response says Connection: close, serve_keepalive.go),
// and once it closes its connection the edge lets go of its stream
// without waiting for a keepalive.
func TestSSEClientThatLeavesIsNoticedAtOnce(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{Keepalive: time.Hour})
	id := wire.NewStreamID()
	e.writeStream(id, wire.Meta{Model: testModel}, nil) // running, no chunk yet
	conn, err := net.Dial("tcp", strings.TrimPrefix(edge.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pipelined := "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	if _, err := io.WriteString(conn, "GET /v1/streams/"+id+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"+pipelined); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || !res.Close || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d, Connection: close %v, %v", res.StatusCode, res.Close, res.Header)
	}
	readEvents(t, bufio.NewReader(res.Body), func(ev sseEvent) bool { return ev.Retry != "" })
	if n := edge.clients.count(clientSSE); n != 1 {
		t.Fatalf("%d SSE clients", n)
	}
	conn.Close()
	waitFor(t, func() bool { return edge.clients.count(clientSSE) == 0 && edge.hub.Streams() == 0 })
}

// heldReads is the edge's real log reader, except that every read after
// the first waits until its context ends, and reports its cause.
type heldReads struct {
	follow.History
	reads atomic.Int32
	// held is closed when the second read starts; ended gets its cause.
	held  chan struct{}
	ended chan error
}

func (h *heldReads) ReadUpTo(ctx context.Context, id string, after uint64, limit int, fn func(chunklog.Entry) error) (uint64, error) {
	if h.reads.Add(1) == 1 {
		return h.History.ReadUpTo(ctx, id, after, limit, fn)
	}
	close(h.held)
	<-ctx.Done()
	h.ended <- context.Cause(ctx)
	return after, context.Cause(ctx)
}

// TestSSEClientThatLeavesStopsTheRead: once a resuming client has its
// first event and hangs up, the edge stops reading the rest of the log for
// it, rather than read to the end for no one.
func TestSSEClientThatLeavesStopsTheRead(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{Keepalive: time.Hour})
	held := &heldReads{History: edge.reader, held: make(chan struct{}), ended: make(chan error, 1)}
	// Nothing is followed yet: a hub that reads through held takes over.
	edge.hub = follow.New(edge.nc, held, edge.js.Conn() == edge.nc, edge.log)
	id := wire.NewStreamID()
	cursors := e.writeStream(id, wire.Meta{Model: testModel}, answer(5)(wire.Request{}))
	conn, err := net.Dial("tcp", strings.TrimPrefix(edge.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET /v1/streams/" + id + " HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: " + e.seal(cursors[0]) + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	events := readEvents(t, bufio.NewReader(res.Body), func(ev sseEvent) bool { return ev.ID != "" })
	if got := events[len(events)-1].ID; got != e.seal(cursors[1]) {
		t.Fatalf("first event %s, want %s", got, e.seal(cursors[1]))
	}
	// The client leaves while the edge reads the rest for it (and not
	// before that read started, when there would be none to stop).
	select {
	case <-held.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the rest of the stream was never read")
	}
	conn.Close()
	select {
	case cause := <-held.ended:
		if !errors.Is(cause, errClientLeft) {
			t.Fatalf("the read ended with %v, want the client's leaving", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the read went on after the client left")
	}
}

// writesConn records each write to it.
type writesConn struct {
	net.Conn
	writes []string
}

func (c *writesConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, string(p))
	return len(p), nil
}

func (c *writesConn) SetWriteDeadline(time.Time) error { return nil }

// TestChunkedConnEndsTheBodyOnce: the last batch carries the end of the
// chunked body in its own write, and ending the response after it writes
// nothing more; a response ended without a last batch (the client left
// before the end) gets the end of the body in a write of its own.
func TestChunkedConnEndsTheBodyOnce(t *testing.T) {
	conn := &writesConn{}
	c := &chunkedConn{conn: conn, head: []byte("HTTP/1.1 200 OK\r\n\r\n")}
	if err := c.write([]byte("data: 1\n\n")); err != nil {
		t.Fatal(err)
	}
	if err := c.writeLast([]byte("data: [DONE]\n\n")); err != nil {
		t.Fatal(err)
	}
	c.end()
	want := []string{"HTTP/1.1 200 OK\r\n\r\n9\r\ndata: 1\n\n\r\n", "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"}
	if !slices.Equal(conn.writes, want) {
		t.Fatalf("writes %q, want %q", conn.writes, want)
	}

	conn = &writesConn{}
	c = &chunkedConn{conn: conn}
	if err := c.write([]byte("data: 1\n\n")); err != nil {
		t.Fatal(err)
	}
	c.end()
	c.end()
	want = []string{"9\r\ndata: 1\n\n\r\n", "0\r\n\r\n"}
	if !slices.Equal(conn.writes, want) {
		t.Fatalf("writes %q, want %q", conn.writes, want)
	}
}
