package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/relaydev/relay/e2e/procs"
	"github.com/relaydev/relay/relay/mockupstream"
)

// Cancellation through DELETE, through a WebSocket cancel message, and by
// the disconnect policy cancel_after. Each ends the stream cancelled within
// 1 s of the cancellation, and the worker closes its call to the fake
// upstream within the same second (seen by a TCP proxy between them, since
// the fake upstream does not report abandoned requests). A client that
// disconnects from an edge with the default policy does not cancel its
// generation.
func TestProcessCancel(t *testing.T) {
	const tokens = 200 // 8 s at 40 ms: no stream ends by itself here
	s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}, Edges: 1, Workers: 1, Proxy: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	edge := s.edgeProcs[0].URL
	cancelling := s.startRole(ctx, procs.Edge, procs.Settings{"edge.on_client_disconnect": "cancel_after 1s"})
	s.edgeProcs = append(s.edgeProcs, cancelling)

	// upstreamClosed waits for the worker's call for marker to close and
	// returns when it did.
	upstreamClosed := func(t *testing.T, marker string) time.Time {
		t.Helper()
		var closed time.Time
		waitFor(t, 5*time.Second, "the upstream call of "+marker+" closed", func() bool {
			at, _, ok := s.proxy.closedFor(marker)
			closed = at
			return ok
		})
		return closed
	}
	oneCall := func(t *testing.T, msgs []mockupstream.Message) {
		t.Helper()
		if n := s.mockStats().ByConversation[mockupstream.ConversationKey(msgs)]; n != 1 {
			t.Errorf("the fake upstream was called %d times; want 1 (a cancellation is not retried)", n)
		}
	}

	t.Run("delete", func(t *testing.T) {
		const marker = "cancel-by-delete"
		msgs, want := prompt("Process test: "+marker, tokens)
		c, err := postStream(ctx, edge, msgs, want, nil)
		must(t, err)
		defer c.close()
		must(t, c.readN(5))
		asked := time.Now()
		code, status := deleteStream(t, ctx, edge, c.id)
		answered := time.Since(asked)
		if code != http.StatusOK || status != "cancelled" {
			t.Fatalf("DELETE: %d %q; want 200 cancelled", code, status)
		}
		must(t, c.readN(1<<20))
		ended := c.at[len(c.at)-1].Sub(asked)
		if c.tr.status != "cancelled" || c.tr.errType != "cancelled" || !c.tr.done {
			t.Fatalf("stream ended with status %q, error type %q, [DONE] %v; want cancelled", c.tr.status, c.tr.errType, c.tr.done)
		}
		closed := upstreamClosed(t, marker).Sub(asked)
		t.Logf("DELETE answered in %v; the client saw the end %v and the upstream call closed %v after the request",
			answered.Round(time.Millisecond), ended.Round(time.Millisecond), closed.Round(time.Millisecond))
		if ended > time.Second || closed > time.Second {
			t.Errorf("end after %v, upstream closed after %v; want both within 1s", ended, closed)
		}
		oneCall(t, msgs)
	})

	t.Run("websocket", func(t *testing.T) {
		const marker = "cancel-by-websocket"
		msgs, _ := prompt("Process test: "+marker, tokens)
		f := wsStart(t, ctx, edge, msgs)
		defer f.conn.Close()
		must(t, f.readChunks(5))
		asked := time.Now()
		must(t, f.conn.WriteJSON(map[string]any{"type": "cancel", "stream_id": f.id}))
		var answer string
		var answered time.Duration
		for answer == "" || f.end == "" {
			m, err := f.next()
			must(t, err)
			switch m.Type {
			case "chunk", "end":
			case "cancellation":
				answer, answered = m.Status, time.Since(asked)
			default:
				t.Fatalf("unexpected message %+v", m)
			}
		}
		ended := f.at[len(f.at)-1].Sub(asked)
		if answer != "cancelled" || f.end != "cancelled" {
			t.Fatalf("cancellation %q, end %q; want cancelled, cancelled", answer, f.end)
		}
		closed := upstreamClosed(t, marker).Sub(asked)
		t.Logf("WebSocket cancel answered in %v; the end came %v and the upstream call closed %v after the request",
			answered.Round(time.Millisecond), ended.Round(time.Millisecond), closed.Round(time.Millisecond))
		if answered > time.Second || ended > time.Second || closed > time.Second {
			t.Errorf("answer after %v, end after %v, upstream closed after %v; want all within 1s", answered, ended, closed)
		}
		oneCall(t, msgs)
	})

	t.Run("disconnect", func(t *testing.T) {
		const cancelMarker, continueMarker = "cancel-after-disconnect", "continue-after-disconnect"
		cancelMsgs, cancelWant := prompt("Process test: "+cancelMarker, tokens)
		gone, err := postStream(ctx, cancelling.URL, cancelMsgs, cancelWant, nil)
		must(t, err)
		continueMsgs, continueWant := prompt("Process test: "+continueMarker, tokens)
		stays, err := postStream(ctx, edge, continueMsgs, continueWant, nil)
		must(t, err)
		must(t, gone.readN(5))
		must(t, stays.readN(5))
		left := time.Now()
		gone.close()
		stays.close()

		var end frameSeen
		waitFor(t, 5*time.Second, "the end of the abandoned stream", func() bool {
			var ok bool
			end, ok = s.frames.end(gone.id)
			return ok
		})
		if end.Frame.Status != "cancelled" {
			t.Fatalf("the abandoned stream ended %q; want cancelled", end.Frame.Status)
		}
		ended := end.At.Sub(left)
		closed := upstreamClosed(t, cancelMarker).Sub(left)
		t.Logf("cancel_after 1s: the stream ended %v and the upstream call closed %v after the client left",
			ended.Round(time.Millisecond), closed.Round(time.Millisecond))
		if ended < time.Second || ended > 2*time.Second || closed < time.Second || closed > 2*time.Second {
			t.Errorf("end after %v, upstream closed after %v; want both 1s after the client left, within 1s", ended, closed)
		}
		oneCall(t, cancelMsgs)

		// The default policy: the generation runs on without its client.
		time.Sleep(time.Until(left.Add(2500 * time.Millisecond)))
		frames := s.frames.of(stays.id)
		if _, ended := s.frames.end(stays.id); ended || frames[len(frames)-1].At.Before(left.Add(2*time.Second)) {
			t.Fatalf("with on_client_disconnect continue, the stream stopped after its client left (ended %v)", ended)
		}
		if _, _, closed := s.proxy.closedFor(continueMarker); closed {
			t.Fatal("with on_client_disconnect continue, the upstream call was closed")
		}
		if code, status := deleteStream(t, ctx, edge, stays.id); code != http.StatusOK || status != "cancelled" {
			t.Fatalf("DELETE of the unfollowed stream: %d %q; want 200 cancelled", code, status)
		}
	})
}

// deleteStream cancels a stream with DELETE /v1/streams/{id} and returns
// the status code and the status in the answer.
func deleteStream(t *testing.T, ctx context.Context, edge, id string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, edge+"/v1/streams/"+id, nil)
	must(t, err)
	resp, err := httpClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	var body struct {
		ID     string `json:"id"`
		Object string `json:"object"`
		Status string `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("DELETE answer: %v", err)
	}
	if body.ID != id || body.Object != "stream.cancellation" {
		t.Errorf("DELETE answer %+v", body)
	}
	return resp.StatusCode, body.Status
}
