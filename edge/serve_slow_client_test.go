package edge

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relaydev/relay/edge/follow"
	"github.com/relaydev/relay/relay/wire"
)

// slowConn reads at most chunk bytes at a time, pausing before each read:
// a client on a slow link. While its link is held (a phone in a tunnel)
// it reads nothing at all.
type slowConn struct {
	net.Conn
	link  *link
	chunk int
	pause time.Duration
}

func (c *slowConn) Read(p []byte) (int, error) {
	c.link.wait()
	time.Sleep(c.pause)
	return c.Conn.Read(p[:min(len(p), c.chunk)])
}

// link is held and released by the test.
type link struct {
	mu   sync.Mutex
	open chan struct{}
}

func newLink() *link {
	l := &link{open: make(chan struct{})}
	close(l.open)
	return l
}

func (l *link) hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open = make(chan struct{})
}

func (l *link) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.open)
}

func (l *link) wait() {
	l.mu.Lock()
	open := l.open
	l.mu.Unlock()
	<-open
}

// setBuffer sets a socket option on a connection or listener being
// created.
func setBuffer(opt, size int) func(network, address string, rc syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, size) })
		if err != nil {
			return err
		}
		return serr
	}
}

// dialSlow returns a dialer with a tiny receive buffer whose connections
// are slowConns on l.
func dialSlow(l *link) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Control: setBuffer(syscall.SO_RCVBUF, 2048)}
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &slowConn{Conn: conn, link: l, chunk: 512, pause: 2 * time.Millisecond}, nil
	}
}

// bigAnswer is n chunks of about 200 bytes each, then done.
func bigAnswer(n int) script {
	return func(wire.Request) []wire.Frame {
		var frames []wire.Frame
		for i := 1; i <= n; i++ {
			frames = append(frames, wire.Frame{Kind: wire.KindChunk, Content: bigWord(i), Provider: "alpha", Model: testModel, Attempt: 1})
		}
		return append(frames, wire.Frame{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "stop", Attempts: 1,
			Usage: &wire.Usage{CompletionTokens: n}})
	}
}

func bigWord(i int) string { return fmt.Sprintf("%04d:%s ", i, strings.Repeat("ü", 95)) }

func bigText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(bigWord(i))
	}
	return b.String()
}

// A slow SSE client and a slow WebSocket client follow a stream next to
// fast ones, and stop reading altogether while it is generated. The fast
// ones finish with the generation all the same; the slow ones' live frames
// are dropped, and once they read again (slowly) they catch up from
// JetStream in bounded batches: what the edge holds for any client stays
// within its bound, and each slow client still gets the exact text.
func TestSlowClientsDoNotSlowOthers(t *testing.T) {
	const chunks = 400
	e := newEnv(t)
	w := e.startWorker(&worker{script: bigAnswer(chunks), gate: make(chan struct{})})
	// Small socket buffers on the edge's side too, so that a slow client
	// blocks the edge's writes within a few kilobytes.
	lc := net.ListenConfig{Control: setBuffer(syscall.SO_SNDBUF, 4096)}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const buffer = 16
	edge := e.startEdgeOn(Config{ClientBuffer: buffer}, ln)

	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "slow"), nil)
	id := res.Header.Get("X-Relay-Stream-Id")
	want := bigText(chunks)

	type result struct {
		name string
		text string
		done time.Time
		err  error
	}
	results := make(chan result, 8)
	sse := func(name string, client *http.Client, r *http.Response) {
		if r == nil {
			req, _ := http.NewRequest("GET", edge.url+"/v1/streams/"+id, nil)
			var err error
			if r, err = client.Do(req); err != nil {
				results <- result{name: name, err: err}
				return
			}
			defer r.Body.Close()
		}
		var text strings.Builder
		events := readEvents(t, bufio.NewReader(r.Body), func(ev sseEvent) bool { return ev.Data == "[DONE]" })
		for _, ev := range frameEvents(events) {
			if c := decodeChunk(t, ev.Data); c.Choices[0].Delta.Content != nil {
				text.WriteString(*c.Choices[0].Delta.Content)
			}
		}
		results <- result{name: name, text: text.String(), done: time.Now()}
	}
	ws := func(name string, dialer *websocket.Dialer) {
		conn, _, err := dialer.Dial("ws"+strings.TrimPrefix(edge.url, "http")+"/v1/ws", nil)
		if err != nil {
			results <- result{name: name, err: err}
			return
		}
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"resume","stream_id":"`+id+`"}`)); err != nil {
			results <- result{name: name, err: err}
			return
		}
		var text strings.Builder
		for {
			var m struct {
				Type  string      `json:"type"`
				Chunk *chunkEvent `json:"chunk"`
			}
			if err := conn.ReadJSON(&m); err != nil {
				results <- result{name: name, err: err}
				return
			}
			if m.Type == "end" {
				break
			}
			if m.Type != "chunk" {
				results <- result{name: name, err: fmt.Errorf("message %+v", m)}
				return
			}
			text.WriteString(*m.Chunk.Choices[0].Delta.Content)
		}
		results <- result{name: name, text: text.String(), done: time.Now()}
	}
	tunnel := newLink()
	slowHTTP := &http.Client{Transport: &http.Transport{DialContext: dialSlow(tunnel)}}
	slowWS := &websocket.Dialer{NetDialContext: dialSlow(tunnel), ReadBufferSize: 512}
	var wg sync.WaitGroup
	wg.Go(func() { sse("fast SSE (the POST)", nil, res) })
	wg.Go(func() { sse("fast SSE", http.DefaultClient, nil) })
	wg.Go(func() { sse("slow SSE", slowHTTP, nil) })
	wg.Go(func() { ws("fast WebSocket", websocket.DefaultDialer) })
	wg.Go(func() { ws("slow WebSocket", slowWS) })
	// Every client follows before the generation starts.
	waitFor(t, func() bool { return edge.clients.count(clientSSE) == 3 && edge.clients.count(clientWS) == 2 })
	time.Sleep(50 * time.Millisecond) // the WebSockets' resume messages
	tunnel.hold()
	began := time.Now()
	close(w.gate)
	// The fast clients finish while the slow ones read nothing.
	var fast []result
	for len(fast) < 3 {
		r := <-results
		if strings.HasPrefix(r.name, "slow") {
			t.Fatalf("%s finished while its link was held: %+v", r.name, r.err)
		}
		fast = append(fast, r)
	}
	tunnel.release()
	wg.Wait()
	close(results)

	var fastDone, slowDone []time.Duration
	for r := range joinResults(fast, results) {
		if r.err != nil {
			t.Fatalf("%s: %v", r.name, r.err)
		}
		if r.text != want {
			t.Fatalf("%s got %d bytes of text, want %d: not exact", r.name, len(r.text), len(want))
		}
		took := r.done.Sub(began)
		t.Logf("%s finished after %v", r.name, took)
		if strings.HasPrefix(r.name, "slow") {
			slowDone = append(slowDone, took)
		} else {
			fastDone = append(fastDone, took)
		}
	}
	stats := edge.hub.Stats()
	held := stats.MaxHeld
	t.Logf("dropped %d live frames, %d woken catch-ups, at most %d frames held for one client",
		stats.Dropped, stats.Woken, held)
	if len(fastDone) != 3 || len(slowDone) != 2 {
		t.Fatalf("fast %v, slow %v", fastDone, slowDone)
	}
	if stats.Dropped == 0 {
		t.Error("no live frame was dropped: the slow clients never fell behind")
	}
	if bound := uint64(max(buffer, follow.MinBatch) + buffer); held > bound {
		t.Errorf("the edge held %d frames for one client, more than %d", held, bound)
	}
}

// joinResults yields the results taken already, then the rest.
func joinResults[T any](taken []T, rest <-chan T) <-chan T {
	out := make(chan T, len(taken)+cap(rest))
	for _, r := range taken {
		out <- r
	}
	for r := range rest {
		out <- r
	}
	close(out)
	return out
}
