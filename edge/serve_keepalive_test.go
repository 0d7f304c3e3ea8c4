package edge

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

// reuseClient sends requests on a transport of its own and tells whether
// each went on a connection an earlier one used.
type reuseClient struct {
	t  *testing.T
	hc *http.Client
}

func newReuseClient(t *testing.T) *reuseClient {
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	return &reuseClient{t: t, hc: &http.Client{Transport: tr}}
}

// do sends the request and reads its whole body.
func (c *reuseClient) do(method, url, body string, close bool) (res *http.Response, text string, reused bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Close = close
	res, err = c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	return res, readAll(c.t, res), reused
}

// TestSSEConnectionServesTheNextRequest: a taken-over stream's connection
// goes back to the server once the stream ended, and carries the
// client's next requests, streamed or not (serve_keepalive.go).
func TestSSEConnectionServesTheNextRequest(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(5), pace: time.Millisecond})
	edge := e.startEdge(Config{})
	c := newReuseClient(t)
	for i := range 3 {
		res, body, reused := c.do("POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), false)
		if res.Close || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream %d: Connection: close %v, %s", i, res.Close, res.Header.Get("Content-Type"))
		}
		if got := checkAnswer(t, body, 5); got != words(5) {
			t.Fatalf("stream %d: text %q", i, got)
		}
		if reused != (i > 0) {
			t.Fatalf("stream %d: on a connection used before: %v", i, reused)
		}
		// The client may read the end before the stream lets go of it.
		waitFor(t, func() bool { return edge.clients.count(clientSSE) == 0 })
	}
	res, _, reused := c.do("GET", edge.url+"/v1/models", "", false)
	if res.StatusCode != http.StatusOK || !reused {
		t.Fatalf("models after streams: %d, on a connection used before: %v", res.StatusCode, reused)
	}
}

// TestSSEConnectionCloseIsHonoured: a client that asks for its connection
// to close gets it closed after the stream, and its next request opens
// another.
func TestSSEConnectionCloseIsHonoured(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(3), pace: time.Millisecond})
	edge := e.startEdge(Config{})
	c := newReuseClient(t)
	res, body, _ := c.do("POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), true)
	if !res.Close {
		t.Fatal("Connection: close asked for, not answered")
	}
	if got := checkAnswer(t, body, 3); got != words(3) {
		t.Fatalf("text %q", got)
	}
	if _, _, reused := c.do("POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), false); reused {
		t.Fatal("the next request went on the closed connection")
	}
}

// TestClosingTheListenerClosesConnectionsGivenBack: a stopping edge
// closes at once the connections given back that wait for their next
// request (net/http's Shutdown would wait until they are 5 s old), and
// leaves one whose request net/http is reading to Shutdown.
func TestClosingTheListenerClosesConnectionsGivenBack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newReuseListener(ln)
	defer l.Close()
	accept := func() *keptConn {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return c.(*keptConn)
	}
	clients := map[string]net.Conn{}
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		clients[c.LocalAddr().String()] = c
	}
	idle, busy := accept(), accept()
	for _, c := range []*keptConn{idle, busy} {
		go c.giveBack()
		if back := accept(); back != idle && back != busy {
			t.Fatalf("accepted %v, not a connection given back", back.RemoteAddr())
		}
	}
	l.connState(busy, http.StateActive) // its client sent a request
	l.Close()

	if n, err := clients[idle.RemoteAddr().String()].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the waiting connection: read %d, %v; want it closed", n, err)
	}
	if _, err := busy.Write([]byte("x")); err != nil {
		t.Fatalf("the busy connection was closed: %v", err)
	}
	if _, err := io.ReadFull(clients[busy.RemoteAddr().String()], make([]byte, 1)); err != nil {
		t.Fatalf("the busy connection: %v", err)
	}
}

// TestConnectionGivenBackIsReclaimedAtTheCap: a stream's connection given
// back and waiting for its client's next request is idle: at the
// connection cap, a new connection is served in its place, and the
// client's next request goes on a connection of its own.
func TestConnectionGivenBackIsReclaimedAtTheCap(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(3), pace: time.Millisecond})
	edge := e.startEdge(Config{MaxConnections: 1})
	c := newReuseClient(t)
	res, body, _ := c.do("POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), false)
	if res.Close || checkAnswer(t, body, 3) != words(3) {
		t.Fatalf("stream: Connection: close %v, %q", res.Close, body)
	}
	// Until the stream gave its connection back, the cap refuses. The
	// probe asks to be closed and reads to the close, so that its own slot
	// is free again (a slot is given back before its socket is closed)
	// when the client's next request dials: a probe left open would not be
	// idle yet for net/http, and that dial would be refused.
	waitFor(t, func() bool {
		c := dialEdge(t, edge)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n"); err != nil {
			return false
		}
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != http.StatusOK {
			return false
		}
		_, err = io.Copy(io.Discard, br)
		return err == nil
	})
	res, _, reused := c.do("GET", edge.url+"/v1/models", "", false)
	if res.StatusCode != http.StatusOK || reused {
		t.Fatalf("the stream's client next: %d, on its old connection: %v", res.StatusCode, reused)
	}
}
