package edge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// cancelBody is the body of a DELETE /v1/streams/{id} answer.
func cancelBody(id string, status wire.Status) string {
	return fmt.Sprintf(`{"id":%q,"object":"stream.cancellation","status":%q}`+"\n", id, status)
}

// endOf returns the end event of a stream's remaining SSE body, checking
// that [DONE] follows it.
func endOf(t *testing.T, body string) chunkEvent {
	t.Helper()
	events := parseSSE(t, body)
	frames := frameEvents(events)
	if len(frames) == 0 || events[len(events)-1].Data != "[DONE]" {
		t.Fatalf("no end in\n%s", body)
	}
	return decodeChunk(t, frames[len(frames)-1].Data)
}

func TestCancelRunningStream(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(10), gate: make(chan struct{})})
	edge := e.startEdge(Config{})

	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	id := res.Header.Get("X-Relay-Stream-Id")
	w.gate <- struct{}{}
	w.gate <- struct{}{}
	r := bufio.NewReader(res.Body)
	readEvents(t, r, seqIs(t, 2))
	_, revision := e.meta(id)

	notices, err := e.nc.SubscribeSync(wire.CancelSubject(id))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	del := do(t, "DELETE", edge.url+"/v1/streams/"+id, "", nil)
	if body := readAll(t, del); del.StatusCode != http.StatusOK || body != cancelBody(id, wire.StatusCancelled) {
		t.Fatalf("DELETE: %d %s", del.StatusCode, body)
	}
	if _, err := notices.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("no notice on %s: %v", wire.CancelSubject(id), err)
	}
	if meta, rev := e.meta(id); !meta.Cancelled || rev <= revision || meta.Model != testModel {
		t.Fatalf("meta after cancel %+v (revision %d, was %d)", meta, rev, revision)
	}
	if got := <-w.cancelled; got != id {
		t.Fatalf("worker cancelled %s", got)
	}

	// The client that started the stream sees it end cancelled, with the
	// usage of the two chunks generated.
	end := endOf(t, readAll(t, &http.Response{Body: readCloser{r}}))
	if end.Relay.Status != wire.StatusCancelled || end.Error == nil || end.Error.Type != wire.TypeCancelled ||
		end.Usage == nil || end.Usage.CompletionTokens != 2 || end.Relay.Seq != 3 {
		t.Fatalf("end %+v", end)
	}

	// Cancelling again answers the same, and writes nothing.
	_, revision = e.meta(id)
	again := do(t, "DELETE", edge.url+"/v1/streams/"+id, "", nil)
	if body := readAll(t, again); again.StatusCode != http.StatusOK || body != cancelBody(id, wire.StatusCancelled) {
		t.Fatalf("second DELETE: %d %s", again.StatusCode, body)
	}
	if _, rev := e.meta(id); rev != revision {
		t.Fatalf("a second cancel wrote the meta again")
	}
}

// TestCancelFinishedStream: a stream that ended is left as it is, and the
// answer is how it ended.
func TestCancelFinishedStream(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	id := wire.NewStreamID()
	e.writeStream(id, wire.Meta{Model: testModel}, answer(3)(wire.Request{}))
	_, revision := e.meta(id)

	res := do(t, "DELETE", edge.url+"/v1/streams/"+id, "", nil)
	if body := readAll(t, res); res.StatusCode != http.StatusOK || body != cancelBody(id, wire.StatusDone) {
		t.Fatalf("DELETE: %d %s", res.StatusCode, body)
	}
	if meta, rev := e.meta(id); meta.Cancelled || rev != revision {
		t.Fatalf("the meta of a finished stream was changed: %+v", meta)
	}
}

// TestCancelQueuedStream: no worker holds the request, so the end does not
// come in time; the durable record makes the worker that takes it later
// end it cancelled without generating.
func TestCancelQueuedStream(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	edge.cancelWait = 50 * time.Millisecond

	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	id := res.Header.Get("X-Relay-Stream-Id")
	del := do(t, "DELETE", edge.url+"/v1/streams/"+id, "", nil)
	if body := readAll(t, del); del.StatusCode != http.StatusAccepted || body != cancelBody(id, statusCancelling) {
		t.Fatalf("DELETE: %d %s", del.StatusCode, body)
	}
	if meta, _ := e.meta(id); !meta.Cancelled {
		t.Fatalf("meta %+v", meta)
	}

	w := e.startWorker(&worker{script: answer(10)})
	if got := <-w.cancelled; got != id {
		t.Fatalf("worker cancelled %s", got)
	}
	end := endOf(t, readAll(t, res))
	if end.Relay.Status != wire.StatusCancelled || end.Relay.Seq != 1 {
		t.Fatalf("end %+v", end)
	}
}

func TestCancelErrors(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	unknown := wire.NewStreamID()
	for _, tc := range []struct {
		id     string
		status int
		body   string
	}{
		{unknown, 404, `{"error":{"message":"stream ` + unknown + ` does not exist or has expired","type":"not_found_error","param":"id","code":"stream_not_found"}}`},
		{"s123", 400, `{"error":{"message":"\"s123\" is not a stream id","type":"invalid_request_error","param":"id","code":"invalid_stream_id"}}`},
	} {
		res := do(t, "DELETE", edge.url+"/v1/streams/"+tc.id, "", nil)
		if body := readAll(t, res); res.StatusCode != tc.status || body != tc.body+"\n" {
			t.Errorf("DELETE %s: %d %s", tc.id, res.StatusCode, body)
		}
	}
}

// TestMetaUpdateIsRevisionChecked: a writer that got in between is not
// overwritten; the change is computed again on what it wrote.
func TestMetaUpdateIsRevisionChecked(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	kv, err := e.js.KeyValue(ctx, wire.MetaBucket)
	if err != nil {
		t.Fatal(err)
	}
	store := newMetaStore(e.js, chunklog.NewReader(e.nc, ""))
	interfere := func(id string) {
		if _, err := kv.Put(ctx, id, mustJSON(t, wire.Meta{Model: otherModel, Created: 7})); err != nil {
			t.Fatal(err)
		}
	}

	id := wire.NewStreamID()
	e.writeStream(id, wire.Meta{Model: testModel}, nil)
	meta, revision, err := store.get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	err = store.update(ctx, id, meta, revision, func(m wire.Meta) (wire.Meta, bool) {
		if calls++; calls == 1 {
			interfere(id)
		}
		return markCancelled(m)
	})
	if got, _ := e.meta(id); err != nil || calls != 2 || got != (wire.Meta{Model: otherModel, Created: 7, Cancelled: true}) {
		t.Fatalf("after a concurrent write: err %v, %d calls, meta %+v", err, calls, got)
	}

	// A writer that always gets in between: the attempts are bounded.
	id = wire.NewStreamID()
	e.writeStream(id, wire.Meta{Model: testModel}, nil)
	meta, revision, _ = store.get(ctx, id)
	calls = 0
	err = store.update(ctx, id, meta, revision, func(m wire.Meta) (wire.Meta, bool) {
		calls++
		interfere(id)
		return markCancelled(m)
	})
	if !errors.Is(err, errContended) || calls != updateAttempts {
		t.Fatalf("always contended: err %v after %d calls", err, calls)
	}
}

func TestWebSocketCancel(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(10), gate: make(chan struct{})})
	edge := e.startEdge(Config{})
	conn := dialWS(t, edge)

	sendWS(t, conn, `{"type":"start","request":`+chatBody(true, "hi")+`}`)
	id := readWS(t, conn).StreamID
	w.gate <- struct{}{}
	if m := readWS(t, conn); m.Type != "chunk" {
		t.Fatalf("first message %+v", m)
	}
	sendWS(t, conn, `{"type":"cancel","stream_id":"`+id+`"}`)
	// The followed stream ends, and the cancel is answered, in either order.
	var end, answer wsMsg
	for end.Type == "" || answer.Type == "" {
		switch m := readWS(t, conn); m.Type {
		case "end":
			end = m
		case "cancellation":
			answer = m
		default:
			t.Fatalf("unexpected %+v", m)
		}
	}
	if end.StreamID != id || end.Status != wire.StatusCancelled || end.Error == nil || end.Error.Type != wire.TypeCancelled ||
		end.FinishReason != "" || end.Usage == nil || end.Usage.CompletionTokens != 1 || end.Attempts != 1 {
		t.Fatalf("end %+v", end)
	}
	if answer.StreamID != id || answer.Status != wire.StatusCancelled {
		t.Fatalf("cancellation %+v", answer)
	}
	if meta, _ := e.meta(id); !meta.Cancelled {
		t.Fatalf("meta %+v", meta)
	}

	// Cancelling a stream that ended answers with how it ended.
	sendWS(t, conn, `{"type":"cancel","stream_id":"`+id+`"}`)
	if m := readWS(t, conn); m.Type != "cancellation" || m.Status != wire.StatusCancelled {
		t.Fatalf("second cancel: %+v", m)
	}
	unknown := wire.NewStreamID()
	for _, tc := range []struct{ id, code string }{{unknown, CodeStreamNotFound}, {"x", CodeInvalidStreamID}} {
		sendWS(t, conn, `{"type":"cancel","stream_id":"`+tc.id+`"}`)
		if m := readWS(t, conn); m.Type != "error" || m.StreamID != tc.id || m.Error.Code != tc.code || m.Error.Param != "stream_id" {
			t.Errorf("cancel %s: %+v", tc.id, m)
		}
	}
}
