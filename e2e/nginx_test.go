package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
)

// Through a real nginx running configs/nginx/relay.conf: tokens arrive as
// they are generated (not buffered until the end), the stream keeps its
// SSE content type and headers, a dropped stream resumes with
// Last-Event-ID, and a WebSocket stream passes the upgrade.
func TestNginxProxiesStreams(t *testing.T) {
	// Paced so that the answer takes about a second and a half; nginx
	// buffering would bunch its events together.
	const (
		tokens   = 40
		interval = 40 * time.Millisecond
	)
	sys := start(t, options{Edges: 2, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: interval}})
	proxy := startNginx(t, sys.Edges)

	t.Run("SSEUnbuffered", func(t *testing.T) {
		t.Parallel()
		msgs, want := prompt("Stream through nginx, token by token.", tokens)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := openSSE(ctx, http.MethodPost, proxy+"/v1/chat/completions", chatBody(t, msgs, true), "")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		h := s.resp.Header
		for name, want := range map[string]string{
			"Content-Type":      "text/event-stream",
			"Cache-Control":     "no-cache",
			"X-Accel-Buffering": "no",
		} {
			if got := h.Get(name); !strings.HasPrefix(got, want) {
				t.Errorf("%s through nginx = %q, want %q...", name, got, want)
			}
		}
		if h.Get("X-Relay-Stream-Id") == "" {
			t.Error("X-Relay-Stream-Id lost through nginx")
		}
		if s.resp.ContentLength != -1 {
			t.Errorf("Content-Length %d: the stream was buffered whole", s.resp.ContentLength)
		}

		tr := &transcript{}
		var arrivals []time.Time // of the events that carry text
		for !tr.done {
			ev, err := s.Next()
			if err != nil {
				t.Fatalf("after %d events: %v", tr.events, err)
			}
			must(t, tr.add(ev))
			var ch chunkJSON
			if json.Unmarshal([]byte(ev.Data), &ch) == nil && len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
				arrivals = append(arrivals, time.Now())
			}
		}
		if got := tr.text.String(); got != want || tr.status != "done" {
			t.Fatalf("status %q, text differs:\n got %q\nwant %q", tr.status, got, want)
		}
		// The fake spends (tokens-1) intervals between its first and last
		// token. Unbuffered, the client sees about that spread between the
		// first and the last text event; a buffering proxy delivers them
		// in one or a few bursts, with most of the spread gone.
		pacing := time.Duration(tokens-1) * interval
		spread := arrivals[len(arrivals)-1].Sub(arrivals[0])
		t.Logf("%d text events over %v; the fake paced them over %v", len(arrivals), spread, pacing)
		if spread < pacing/2 {
			t.Fatalf("text events arrived within %v, the fake paced them over %v: nginx buffered the stream", spread, pacing)
		}
	})

	t.Run("ResumeWithLastEventID", func(t *testing.T) {
		t.Parallel()
		msgs, want := prompt("Drop me behind nginx, then resume.", tokens)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := openSSE(ctx, http.MethodPost, proxy+"/v1/chat/completions", chatBody(t, msgs, true), "")
		if err != nil {
			t.Fatal(err)
		}
		id := s.resp.Header.Get("X-Relay-Stream-Id")
		tr := &transcript{}
		must(t, tr.readUntil(s, 5))
		s.Close() // mid-stream: the answer takes over a second more
		if tr.done {
			t.Fatal("the stream ended before the drop")
		}
		s, err = openSSE(ctx, http.MethodGet, proxy+"/v1/streams/"+id, nil, tr.lastID)
		if err != nil {
			t.Fatalf("resume through nginx: %v", err)
		}
		defer s.Close()
		must(t, tr.readUntil(s, 0))
		if got := tr.text.String(); got != want || tr.status != "done" {
			t.Fatalf("status %q, text differs:\n got %q\nwant %q", tr.status, got, want)
		}
	})

	t.Run("WebSocket", func(t *testing.T) {
		t.Parallel()
		msgs, want := prompt("A WebSocket through nginx.", tokens)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		conn := dialWS(t, ctx, proxy)
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		var req map[string]any
		must(t, json.Unmarshal(chatBody(t, msgs, true), &req))
		must(t, conn.WriteJSON(map[string]any{"type": "start", "request": req}))
		tr := &transcript{}
		for !tr.done {
			var m wsMessage
			if err := conn.ReadJSON(&m); err != nil {
				t.Fatalf("read after %d events: %v", tr.events, err)
			}
			switch m.Type {
			case "started":
			case "chunk":
				must(t, tr.add(sseEvent{ID: m.Cursor, Data: string(m.Chunk)}))
			case "end":
				if m.Status != "done" {
					t.Fatalf("end message %+v", m)
				}
				tr.done = true
			default:
				t.Fatalf("unexpected message %+v", m)
			}
		}
		if got := tr.text.String(); got != want {
			t.Fatalf("text differs:\n got %q\nwant %q", got, want)
		}
	})
}
