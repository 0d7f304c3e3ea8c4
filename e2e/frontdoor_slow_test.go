package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// slowConn reads at most chunk bytes at a time, pausing before each read:
// a phone on a slow link. After its first holdAfter bytes (the handshake
// and a few events) it reads nothing until tunnel is closed.
type slowConn struct {
	net.Conn
	tunnel    <-chan struct{}
	holdAfter int
	read      int
	chunk     int
	pause     time.Duration
}

func (c *slowConn) Read(p []byte) (int, error) {
	if c.read >= c.holdAfter {
		<-c.tunnel
		time.Sleep(c.pause)
	}
	n, err := c.Conn.Read(p[:min(len(p), c.chunk)])
	c.read += n
	return n, err
}

// dialSlow dials with a 2 KiB receive buffer; the connections read slowly,
// and not at all after their first KiB until tunnel is closed.
func dialSlow(tunnel <-chan struct{}) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
			if err != nil {
				return err
			}
			return serr
		}}
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &slowConn{Conn: conn, tunnel: tunnel, holdAfter: 1024, chunk: 128, pause: 2 * time.Millisecond}, nil
	}
}

// A slow SSE client and a slow WebSocket client follow a stream next to
// fast ones, through the real worker, and read nothing until the fast ones
// are done: the fast ones finish with the generation all the same, then
// the slow ones read (slowly) and get the exact text too. (The bound on
// what the edge holds for a slow client is checked in
// edge.TestSlowClientsDoNotSlowOthers, which can see the edge's counters.)
func TestFrontDoorSlowClients(t *testing.T) {
	const tokens = 400
	sys := start(t, options{Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 2 * time.Millisecond}, Tune: func(c *config.Config) {
		quickStop(c)
		c.Edge.ClientBuffer = 8
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	msgs, want := prompt("Slow clients must not slow anyone.", tokens)
	began := time.Now()
	resp := send(t, ctx, "POST", sys.Edges[0]+"/v1/chat/completions", chatBody(t, msgs, true), "", nil)
	id := resp.Header.Get("X-Relay-Stream-Id")

	type result struct {
		name string
		text string
		took time.Duration
		err  error
	}
	var mu sync.Mutex
	var results []result
	report := func(r result) {
		mu.Lock()
		defer mu.Unlock()
		r.took = time.Since(began)
		results = append(results, r)
	}
	sse := func(name string, client *http.Client, resp *http.Response) {
		if resp == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", sys.Edges[0]+"/v1/streams/"+id, nil)
			var err error
			if resp, err = client.Do(req); err != nil {
				report(result{name: name, err: err})
				return
			}
			defer resp.Body.Close()
		}
		tr := &transcript{}
		err := tr.readUntil(sseOf(resp), 0)
		report(result{name: name, text: tr.text.String(), err: err})
	}
	ws := func(name string, dialer *websocket.Dialer) {
		conn, _, err := dialer.DialContext(ctx, "ws"+strings.TrimPrefix(sys.Edges[0], "http")+"/v1/ws", nil)
		if err != nil {
			report(result{name: name, err: err})
			return
		}
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if err := conn.WriteJSON(map[string]string{"type": "resume", "stream_id": id}); err != nil {
			report(result{name: name, err: err})
			return
		}
		var text strings.Builder
		for {
			var m wsMessage
			if err := conn.ReadJSON(&m); err != nil {
				report(result{name: name, err: err})
				return
			}
			if m.Type == "end" {
				break
			}
			var c chunkJSON
			if m.Type != "chunk" || json.Unmarshal(m.Chunk, &c) != nil {
				report(result{name: name, err: fmt.Errorf("message %+v", m)})
				return
			}
			text.WriteString(c.Choices[0].Delta.Content)
		}
		report(result{name: name, text: text.String()})
	}
	tunnel := make(chan struct{})
	slowHTTP := &http.Client{Transport: &http.Transport{DialContext: dialSlow(tunnel)}}
	var fast, slow sync.WaitGroup
	fast.Go(func() { sse("fast SSE (the POST)", nil, resp) })
	fast.Go(func() { sse("fast SSE", httpClient, nil) })
	fast.Go(func() { ws("fast WebSocket", websocket.DefaultDialer) })
	slow.Go(func() { sse("slow SSE", slowHTTP, nil) })
	slow.Go(func() { ws("slow WebSocket", &websocket.Dialer{NetDialContext: dialSlow(tunnel), ReadBufferSize: 128}) })
	fast.Wait()
	mu.Lock()
	if len(results) != 3 {
		t.Fatalf("a slow client finished while it read nothing: %+v", results)
	}
	mu.Unlock()
	close(tunnel)
	slow.Wait()

	// A fast client is done soon after the end frame was stored, however
	// long the generation took on a busy machine: JetStream's own
	// timestamp of that frame is the measure, not the generation's
	// nominal length.
	_, js := relaytest.Connect(t, sys.NATS, streams.Topology{})
	chunks, err := js.Stream(ctx, wire.ChunkStreamOf(id))
	if err != nil {
		t.Fatalf("stream %s: %v", wire.ChunkStreamOf(id), err)
	}
	end, err := chunks.GetLastMsgForSubject(ctx, wire.ChunkSubject(id))
	if err != nil {
		t.Fatalf("the stream's end frame: %v", err)
	}
	stored := end.Time.Sub(began)
	var slowest, fastest time.Duration = 0, time.Hour
	for _, r := range results {
		t.Logf("%s: %v (end frame stored at %v)", r.name, r.took, stored)
		if r.err != nil || r.text != want {
			t.Fatalf("%s: %v; text exact: %v", r.name, r.err, r.text == want)
		}
		if strings.HasPrefix(r.name, "fast") {
			slowest = max(slowest, r.took)
		} else {
			fastest = min(fastest, r.took)
		}
	}
	if lag := slowest - stored; lag > 2*time.Second {
		t.Errorf("a fast client got the end %v after it was stored", lag)
	}
	if fastest <= slowest {
		t.Errorf("a slow client (%v) was not slower than the fast ones (%v)", fastest, slowest)
	}
}
