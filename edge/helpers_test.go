package edge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/provider"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// testModel is served by the test catalog; otherModel too, by a second
// provider.
const (
	testModel  = "gpt-test"
	otherModel = "gpt-other"
)

// env is one embedded NATS server with the relay's assets.
type env struct {
	t   *testing.T
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := relaytest.NATS(t)
	nc, js := relaytest.Connect(t, srv, streams.Topology{MemoryStorage: true})
	return &env{t: t, srv: srv, nc: nc, js: js}
}

func testCatalog(t *testing.T) *provider.Catalog {
	t.Helper()
	c, err := provider.NewCatalog([]provider.Config{
		{Name: "alpha", BaseURL: "http://127.0.0.1:1/v1", Models: []string{testModel}},
		{Name: "beta", BaseURL: "http://127.0.0.1:2/v1", Models: []string{testModel, otherModel}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testEdge is an edge serving on a real loopback listener.
type testEdge struct {
	*Server
	url      string
	shutdown func() error
}

// startEdge serves an edge on its own NATS connection, as a separate edge
// process would, and shuts it down when the test ends.
func (e *env) startEdge(cfg Config) *testEdge {
	e.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	return e.startEdgeOn(cfg, ln)
}

// startEdgeOn is startEdge serving on ln.
func (e *env) startEdgeOn(cfg Config, ln net.Listener) *testEdge {
	e.t.Helper()
	nc, js := relaytest.Connect(e.t, e.srv, streams.Topology{MemoryStorage: true})
	s, err := New(cfg, Deps{NC: nc, JS: js, Catalog: testCatalog(e.t), Logger: relaytest.Logger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	te := &testEdge{Server: s, url: "http://" + ln.Addr().String(), shutdown: sync.OnceValue(func() error {
		cancel()
		return <-done
	})}
	e.t.Cleanup(func() {
		if err := te.shutdown(); err != nil {
			e.t.Errorf("Serve: %v", err)
		}
	})
	return te
}

// script says which frames a scripted worker appends for a request, after
// its claim.
type script func(wire.Request) []wire.Frame

// answer is n chunks "w1 ".."wn " from provider alpha and a done end frame.
func answer(n int) script {
	return func(wire.Request) []wire.Frame {
		var frames []wire.Frame
		for i := 1; i <= n; i++ {
			f := wire.Frame{Kind: wire.KindChunk, Content: fmt.Sprintf("w%d ", i), Provider: "alpha", Model: testModel, Attempt: 1}
			if i == 1 {
				f.Role = "assistant"
			}
			frames = append(frames, f)
		}
		return append(frames, wire.Frame{
			Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "stop", Attempts: 1, Cost: 0.25,
			Usage: &wire.Usage{PromptTokens: 3, CompletionTokens: n, TotalTokens: 3 + n},
		})
	}
}

// failing is one chunk, then an end frame with status and err, and the
// usage and cost of the attempts.
func failing(status wire.Status, err *wire.Error) script {
	return func(wire.Request) []wire.Frame {
		return []wire.Frame{
			{Kind: wire.KindChunk, Role: "assistant", Content: "partial", Provider: "alpha", Model: testModel, Attempt: 1},
			{Kind: wire.KindEnd, Status: status, Error: err, Attempts: 2, Cost: 0.0625,
				Usage: &wire.Usage{PromptTokens: 6, CompletionTokens: 1, TotalTokens: 7}},
		}
	}
}

// worker stands in for the worker role, written concurrently with the
// edge: it takes requests from the work queue and appends a claim and the
// frames of its script, pausing pace between frames, or, with a gate, one
// frame per value received from it. It honours cancellation as the
// protocol asks: a request whose Meta is cancelled when taken, or whose
// notice arrives on its cancel subject while it waits for the next frame,
// ends with a cancelled end frame instead of the rest of its script. Like
// a real worker it gives a stream up quietly when fenced: on a loaded
// machine a request can be redelivered while the first delivery is still
// being served (the worker reports no progress), and only one of the two
// gets to append.
type worker struct {
	script script
	pace   time.Duration
	gate   chan struct{}
	reqs   chan wire.Request
	// cancelled receives the id of every stream the worker ended cancelled.
	cancelled chan string
}

// cancelledEnd is the scripted worker's end frame for a stream cancelled
// after chunks chunks: the usage of what was generated, as a real worker
// reports it.
func cancelledEnd(chunks int) wire.Frame {
	return wire.Frame{
		Kind: wire.KindEnd, Status: wire.StatusCancelled, Attempts: 1, Cost: 0.125,
		Error: &wire.Error{Message: "the generation was cancelled", Type: wire.TypeCancelled, Code: "cancelled", Status: 499},
		Usage: &wire.Usage{PromptTokens: 3, CompletionTokens: chunks, TotalTokens: 3 + chunks},
	}
}

func (e *env) startWorker(w *worker) *worker {
	e.t.Helper()
	w.reqs = make(chan wire.Request, 1024)
	w.cancelled = make(chan string, 1024)
	cons, err := e.js.Consumer(context.Background(), wire.RequestStream, wire.WorkerConsumer)
	if err != nil {
		e.t.Fatal(err)
	}
	kv, err := e.js.KeyValue(context.Background(), wire.MetaBucket)
	if err != nil {
		e.t.Fatal(err)
	}
	reader := chunklog.NewReader(e.nc, "")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		wg.Go(func() {
			var req wire.Request
			if err := json.Unmarshal(msg.Data(), &req); err != nil {
				e.t.Errorf("worker: decode request: %v", err)
				return
			}
			select {
			case w.reqs <- req:
			case <-ctx.Done():
				return // the test ended without reading every request
			}
			// Subscribed before anything is appended, so that no notice
			// sent after a client saw a frame is missed.
			notices := make(chan *nats.Msg, 1)
			sub, err := e.nc.ChanSubscribe(wire.CancelSubject(req.StreamID), notices)
			if err != nil {
				e.t.Errorf("worker: subscribe: %v", err)
				return
			}
			defer sub.Unsubscribe()
			// A request a worker took from its offer has no Meta record
			// (its taker's claim carries the Meta), and no client knew its
			// id to cancel it before it was queued.
			var meta wire.Meta
			if msg.Headers().Get(wire.HeaderTakenBy) == "" {
				entry, err := awaitMetaEntry(ctx, kv, req.StreamID)
				if err != nil || json.Unmarshal(entry.Value(), &meta) != nil {
					// The test may end while this request is being taken.
					if ctx.Err() == nil {
						e.t.Errorf("worker: meta of %s: %v", req.StreamID, err)
					}
					return
				}
			}
			wr := chunklog.NewWriter(e.js, reader, req.StreamID, 0, 0)
			if _, err := wr.Append(ctx, wire.ClaimFrame("scripted", &req)); err != nil {
				if ctx.Err() == nil && !errors.Is(err, chunklog.ErrFenced) {
					e.t.Errorf("worker: claim: %v", err)
				}
				return
			}
			cancelled := meta.Cancelled
			for i, f := range w.script(req) {
				if !cancelled {
					var tick <-chan time.Time
					if w.gate == nil {
						tick = time.After(w.pace)
					}
					select {
					case <-w.gate:
						time.Sleep(w.pace)
					case <-tick:
					case <-notices:
						cancelled = true
					case <-ctx.Done():
						return
					}
				}
				if cancelled {
					f = cancelledEnd(i)
				}
				if _, err := wr.Append(ctx, f); err != nil {
					if ctx.Err() == nil && !errors.Is(err, chunklog.ErrFenced) {
						e.t.Errorf("worker: append: %v", err)
					}
					return
				}
				if cancelled {
					w.cancelled <- req.StreamID
					break
				}
			}
			msg.Ack()
		})
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cc.Stop()
		cancel()
		wg.Wait()
	})
	return w
}

// awaitMetaEntry reads a stream's Meta, waiting up to 20 s for it: the
// edge stores it and queues the request concurrently, so the request may
// arrive first, and on a loaded machine a read may time out (the scripted
// worker would then leave its client waiting for frames that never come).
func awaitMetaEntry(ctx context.Context, kv jetstream.KeyValue, id string) (jetstream.KeyValueEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		entry, err := kv.Get(ctx, id)
		if err == nil {
			return entry, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// writeStream creates a stream directly, without the work queue: its Meta
// and the frames, after a claim. It returns the cursors of the frames.
func (e *env) writeStream(id string, meta wire.Meta, frames []wire.Frame) []wire.Cursor {
	e.t.Helper()
	ctx := context.Background()
	kv, err := e.js.KeyValue(ctx, wire.MetaBucket)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := kv.Create(ctx, id, mustJSON(e.t, meta)); err != nil {
		e.t.Fatal(err)
	}
	w := chunklog.NewWriter(e.js, chunklog.NewReader(e.nc, ""), id, 0, 0)
	if _, err := w.Append(ctx, wire.Frame{Kind: wire.KindClaim, Worker: "test"}); err != nil {
		e.t.Fatal(err)
	}
	var cursors []wire.Cursor
	for _, f := range frames {
		c, err := w.Append(ctx, f)
		if err != nil {
			e.t.Fatal(err)
		}
		cursors = append(cursors, c)
	}
	return cursors
}

// fixCursorKey makes fixedCursorKey the cluster's cursor key, for output
// compared with golden files; before the first edge starts.
func (e *env) fixCursorKey() {
	e.t.Helper()
	kv, err := e.js.KeyValue(context.Background(), wire.KeyBucket)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := kv.Create(context.Background(), wire.CursorKeyName, []byte(fixedCursorSecret)); err != nil {
		e.t.Fatal(err)
	}
}

// seal renders c as the edges of e's cluster show it to clients.
func (e *env) seal(c wire.Cursor) string {
	e.t.Helper()
	key, err := newCursorKeys(e.js).get(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return key.String(c)
}

// openCursor reads a cursor an edge of e's cluster showed.
func (e *env) openCursor(s string) (wire.Cursor, error) {
	key, err := newCursorKeys(e.js).get(context.Background())
	if err != nil {
		return wire.Cursor{}, err
	}
	return key.Parse(s)
}

// seqIs is a readEvents stop condition: the event of the chunk of
// sequence seq.
func seqIs(t *testing.T, seq uint64) func(sseEvent) bool {
	return func(ev sseEvent) bool { return ev.ID != "" && decodeChunk(t, ev.Data).Relay.Seq == seq }
}

// meta reads a stream's Meta and its revision straight from the bucket.
func (e *env) meta(id string) (wire.Meta, uint64) {
	e.t.Helper()
	kv, err := e.js.KeyValue(context.Background(), wire.MetaBucket)
	if err != nil {
		e.t.Fatal(err)
	}
	entry, err := kv.Get(context.Background(), id)
	if err != nil {
		e.t.Fatalf("meta %s: %v", id, err)
	}
	var m wire.Meta
	if err := json.Unmarshal(entry.Value(), &m); err != nil {
		e.t.Fatal(err)
	}
	return m, entry.Revision()
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chatBody is a chat completion request.
func chatBody(stream bool, content string) string {
	return fmt.Sprintf(`{"model":%q,"stream":%t,"messages":[{"role":"user","content":%q}]}`, testModel, stream, content)
}

// do sends a request with a deadline and returns the response. A body is
// sent as JSON unless header names another Content-Type.
func do(t *testing.T, method, url, body string, header http.Header) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// readAll reads a whole response body.
func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sseEvent is one parsed server-sent event; a comment has only Comment.
type sseEvent struct {
	ID, Event, Data, Retry, Comment string
}

// parseSSE splits an event stream into events, in order.
func parseSSE(t *testing.T, body string) []sseEvent {
	t.Helper()
	var events []sseEvent
	for block := range strings.SplitSeq(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		var ev sseEvent
		for line := range strings.SplitSeq(block, "\n") {
			if line == "" {
				continue
			}
			field, value, _ := strings.Cut(line, ": ")
			switch field {
			case "id":
				ev.ID = value
			case "event":
				ev.Event = value
			case "data":
				ev.Data = value
			case "retry":
				ev.Retry = value
			case "":
				ev.Comment = value
			default:
				t.Fatalf("unexpected SSE line %q", line)
			}
		}
		events = append(events, ev)
	}
	return events
}

// readEvents reads events from a live stream until stop returns true for
// one, and returns them.
func readEvents(t *testing.T, r *bufio.Reader, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	var events []sseEvent
	var block strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read SSE after %d events: %v", len(events), err)
		}
		if line != "\n" {
			block.WriteString(line)
			continue
		}
		ev := parseSSE(t, block.String())[0]
		block.Reset()
		events = append(events, ev)
		if stop(ev) {
			return events
		}
	}
}

// chunkEvent is the part of a chunk event's data the tests check.
type chunkEvent struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Created int64  `json:"created"`
	Choices []struct {
		Delta struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wire.Usage `json:"usage"`
	Error *chat.Error `json:"error"`
	Relay struct {
		StreamID string      `json:"stream_id"`
		Seq      uint64      `json:"seq"`
		Cursor   string      `json:"cursor"`
		Provider string      `json:"provider"`
		Status   wire.Status `json:"status"`
		Attempts int         `json:"attempts"`
	} `json:"relay"`
}

func decodeChunk(t *testing.T, data string) chunkEvent {
	t.Helper()
	var c chunkEvent
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return c
}

// frameEvents are the events that carry frames (they have an id).
func frameEvents(events []sseEvent) []sseEvent {
	var out []sseEvent
	for _, ev := range events {
		if ev.ID != "" {
			out = append(out, ev)
		}
	}
	return out
}

// checkAnswer checks a complete SSE body of the answer(n) script: retry
// first, chunk events with seq 1..n and strictly increasing cursors, the
// final chunk with usage, then [DONE]; it returns the text.
func checkAnswer(t *testing.T, body string, n int) string {
	t.Helper()
	events := parseSSE(t, body)
	if events[0].Retry == "" {
		t.Fatalf("first event %+v is not retry", events[0])
	}
	if last := events[len(events)-1]; last.Data != "[DONE]" || last.ID != "" {
		t.Fatalf("last event %+v is not [DONE]", last)
	}
	frames := frameEvents(events)
	if len(frames) != n+1 {
		t.Fatalf("%d frame events, want %d:\n%s", len(frames), n+1, body)
	}
	var text strings.Builder
	seen := map[string]bool{}
	for i, ev := range frames {
		if len(ev.ID) != wire.SealedCursorLen || seen[ev.ID] {
			t.Fatalf("event %d has id %q, not a sealed cursor of its own", i, ev.ID)
		}
		seen[ev.ID] = true
		chunk := decodeChunk(t, ev.Data)
		if chunk.Relay.Cursor != ev.ID || chunk.Relay.Seq != uint64(i+1) {
			t.Fatalf("event %d relay %+v does not match id %s", i, chunk.Relay, ev.ID)
		}
		if i < n {
			text.WriteString(*chunk.Choices[0].Delta.Content)
			continue
		}
		if chunk.Choices[0].FinishReason == nil || *chunk.Choices[0].FinishReason != "stop" || chunk.Usage == nil || chunk.Usage.CompletionTokens != n {
			t.Fatalf("final chunk %s", ev.Data)
		}
	}
	return text.String()
}

// words is the text of answer(n).
func words(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "w%d ", i)
	}
	return b.String()
}

func jsonDecode(res *http.Response, v any) error {
	return json.NewDecoder(res.Body).Decode(v)
}

// waitFor is relaytest.Eventually with the package's usual bounds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	relaytest.Eventually(t, 10*time.Second, 5*time.Millisecond, cond)
}

// readCloser lets readAll read what is left in a bufio.Reader.
type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }

func decodeInto(data string, v any) error { return json.Unmarshal([]byte(data), v) }
