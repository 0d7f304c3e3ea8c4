package worker

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"bytes"
	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/runecut"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
	"sync"
)

func TestStreamsAnswer(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 40, TokenInterval: time.Millisecond}})
	id := wire.NewStreamID()
	h.submit(id, "tell me a story")

	frames := h.waitEnd(id)
	if f := frames[0].Frame; f.Kind != wire.KindClaim || f.Worker != "test-worker" {
		t.Fatalf("first frame = %+v, want a claim by test-worker", f)
	}
	text, chunks := chunkText(t, frames)
	if want := mockupstream.AnswerText(userMessages("tell me a story"), 40); text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
	for i, c := range chunks {
		if wantRole := map[bool]string{true: "assistant"}[i == 0]; c.Role != wantRole {
			t.Errorf("chunk %d role = %q, want %q", c.Seq, c.Role, wantRole)
		}
		if c.Provider != "mock" || c.Model != "mock-1" || c.Attempt != 1 || c.Seam != "" {
			t.Errorf("chunk %d = %+v, want provider mock, model mock-1, attempt 1, no seam", c.Seq, c)
		}
	}
	end := frames[len(frames)-1].Frame
	if end.Status != wire.StatusDone || end.FinishReason != "stop" || end.Attempts != 1 || end.Error != nil {
		t.Fatalf("end = %+v, want done/stop after 1 attempt", end)
	}
	if u := end.Usage; u == nil || u.CompletionTokens != 40 || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Fatalf("usage = %+v, want 40 completion tokens", end.Usage)
	}
	if status := h.waitJob(id); status != "done" {
		t.Fatalf("job status = %q", status)
	}
	h.waitAcked()
}

func TestCoalescesChunks(t *testing.T) {
	const tokens = 3000
	h := start(t, setup{mock: mockupstream.Config{Tokens: tokens, TokenInterval: -1}})
	id := wire.NewStreamID()
	h.submit(id, "a long one")

	frames := h.waitEnd(id)
	text, chunks := chunkText(t, frames)
	if want := mockupstream.AnswerText(userMessages("a long one"), tokens); text != want {
		t.Fatalf("text differs from the mock's answer (%d vs %d bytes)", len(text), len(want))
	}
	if len(chunks) >= tokens {
		t.Fatalf("%d chunks for %d tokens: deltas were not coalesced", len(chunks), tokens)
	}
	for _, c := range chunks {
		if !utf8.ValidString(c.Content) {
			t.Fatalf("chunk %d is not valid UTF-8", c.Seq)
		}
	}
	t.Logf("%d tokens in %d chunks", tokens, len(chunks))
}

func TestRequestFaultFailsWithProviderError(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{TokenInterval: -1}})
	id := wire.NewStreamID()
	h.submit(id, "[[mock: status=400]] hello")

	frames := h.waitEnd(id)
	if _, chunks := chunkText(t, frames); len(chunks) != 0 {
		t.Fatalf("%d chunks published for a rejected request", len(chunks))
	}
	end := frames[len(frames)-1].Frame
	want := wire.Error{Message: "mock-upstream: injected fault status=400", Type: "invalid_request_error", Status: http.StatusBadRequest}
	if end.Status != wire.StatusFailed || end.Error == nil || *end.Error != want {
		t.Fatalf("end = %+v, error %+v; want failed with %+v", end, end.Error, want)
	}
	h.waitJob(id)
	if st := h.mock.Stats(); st.ChatRequests != 1 || st.ByStatus[http.StatusBadRequest] != 1 {
		t.Fatalf("mock stats = %+v, want exactly one request answered 400", st)
	}
	h.waitAcked()
}

func TestEndedStreamIsOnlyAcked(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{TokenInterval: -1}, noWorker: true})
	id := wire.NewStreamID()
	if err := h.appendFrames(id,
		wire.Frame{Kind: wire.KindClaim, Worker: "earlier"},
		wire.Frame{Kind: wire.KindChunk, Role: "assistant", Content: "hi", Provider: "mock", Model: "mock-1", Attempt: 1},
		wire.Frame{Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "stop", Attempts: 1},
	); err != nil {
		t.Fatal(err)
	}
	h.submit(id, "hello again")
	h.redeliver()
	h.startWorker(Config{}, nil)

	if status := h.waitJob(id); status != "already_ended" {
		t.Fatalf("job status = %q, want already_ended", status)
	}
	h.waitAcked()
	if n := len(h.frames(id)); n != 3 {
		t.Fatalf("stream has %d frames, want the 3 it had", n)
	}
	if st := h.mock.Stats(); st.ChatRequests != 0 {
		t.Fatalf("%d upstream requests for an ended stream", st.ChatRequests)
	}
}

func TestTakeoverContinuesAnswer(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 40, TokenInterval: -1}, noWorker: true})
	id := wire.NewStreamID()
	content := "take it over"
	answer := mockupstream.AnswerText(userMessages(content), 40)
	// The dead worker stopped in the middle of a token, on a rune boundary.
	cut := runecut.Len([]byte(answer), len(answer)/2)
	first := runecut.Len([]byte(answer), cut/2)
	if err := h.appendFrames(id,
		wire.Frame{Kind: wire.KindClaim, Worker: "dead-worker"},
		wire.Frame{Kind: wire.KindChunk, Role: "assistant", Content: answer[:first], Provider: "mock", Model: "mock-1", Attempt: 1},
		wire.Frame{Kind: wire.KindChunk, Content: answer[first:cut], Provider: "mock", Model: "mock-1", Attempt: 1},
	); err != nil {
		t.Fatal(err)
	}
	h.submit(id, content)
	h.redeliver()
	h.startWorker(Config{}, nil)

	frames := h.waitEnd(id)
	if f := frames[3].Frame; f.Kind != wire.KindClaim || f.Worker != "test-worker" {
		t.Fatalf("frame after the dead worker's = %+v, want our claim", f)
	}
	text, chunks := chunkText(t, frames)
	if text != answer {
		t.Fatalf("text = %q\nwant   %q", text, answer)
	}
	if len(chunks) < 3 {
		t.Fatalf("no new chunks after the takeover")
	}
	if c := chunks[2]; c.Seam != wire.SeamTakeover || c.Attempt != 2 || c.Role != "" {
		t.Fatalf("first new chunk = %+v, want seam takeover, attempt 2, no role", c)
	}
	for _, c := range chunks[3:] {
		if c.Seam != "" || c.Attempt != 2 {
			t.Fatalf("later chunk = %+v, want attempt 2 without seam", c)
		}
	}
	if end := frames[len(frames)-1].Frame; end.Status != wire.StatusDone || end.Attempts != 2 {
		t.Fatalf("end = %+v, want done after 2 attempts", end)
	}
	if st := h.mock.Stats(); st.ChatRequests != 1 {
		t.Fatalf("%d upstream requests, want 1", st.ChatRequests)
	}
}

func TestTakeoverKeepsWithinMaxTokens(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 40, TokenInterval: -1}})
	id := wire.NewStreamID()
	content := "take it over"
	tokens := mockupstream.Answer(userMessages(content), 40)
	// The dead worker published 7 tokens in two chunks; the client allows 10.
	if err := h.appendFrames(id,
		wire.Frame{Kind: wire.KindClaim, Worker: "dead-worker"},
		wire.Frame{Kind: wire.KindChunk, Role: "assistant", Content: strings.Join(tokens[:3], ""), Tokens: 3, Provider: "mock", Model: "mock-1", Attempt: 1},
		wire.Frame{Kind: wire.KindChunk, Content: strings.Join(tokens[3:7], ""), Tokens: 4, Provider: "mock", Model: "mock-1", Attempt: 1},
	); err != nil {
		t.Fatal(err)
	}
	h.submitBody(id, "mock-1", map[string]any{"model": "mock-1", "messages": userMessages(content), "max_tokens": 10})

	frames := h.waitEnd(id)
	text, chunks := chunkText(t, frames)
	if want := strings.Join(tokens[:10], ""); text != want {
		t.Fatalf("text = %q\nwant   %q (10 tokens)", text, want)
	}
	n := 0
	for _, c := range chunks {
		n += c.Tokens
	}
	if n != 10 {
		t.Fatalf("the chunks count %d tokens, want 10", n)
	}
	if end := frames[len(frames)-1].Frame; end.Status != wire.StatusDone || end.FinishReason != "length" {
		t.Fatalf("end = %+v, want done with finish reason length", end)
	}
}

func TestTakeoverOfToolCallsEndsIncomplete(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{TokenInterval: -1}, noWorker: true})
	id := wire.NewStreamID()
	if err := h.appendFrames(id,
		wire.Frame{Kind: wire.KindClaim, Worker: "dead-worker"},
		wire.Frame{Kind: wire.KindChunk, Role: "assistant", Attempt: 1,
			ToolCalls: []byte(`[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{"}}]`)},
	); err != nil {
		t.Fatal(err)
	}
	h.submit(id, "call a tool")
	h.redeliver()
	h.startWorker(Config{}, nil)

	frames := h.waitEnd(id)
	if end := frames[len(frames)-1].Frame; end.Status != wire.StatusIncomplete || end.Error == nil || end.Error.Type != wire.TypeIncomplete {
		t.Fatalf("end = %+v, want incomplete", end)
	}
	if st := h.mock.Stats(); st.ChatRequests != 0 {
		t.Fatalf("%d upstream requests, want none", st.ChatRequests)
	}
}

func TestFencedJobStops(t *testing.T) {
	// A long AckWait keeps the unacked request from coming back during the
	// test; slow tokens keep the stream running while it is taken over.
	h := start(t, setup{
		mock:     mockupstream.Config{Tokens: 500, TokenInterval: 10 * time.Millisecond},
		topology: streams.Topology{AckWait: time.Minute},
	})
	id := wire.NewStreamID()
	h.submit(id, "slow answer")

	h.usurp(id)

	if status := h.waitJob(id); status != "fenced" {
		t.Fatalf("job status = %q, want fenced", status)
	}
	frames := h.frames(id)
	if last := frames[len(frames)-1].Frame; last.Kind != wire.KindClaim || last.Worker != "usurper" {
		t.Fatalf("last frame = %+v, want the usurper's claim: the fenced worker wrote after it", last)
	}
	if unacked, _ := h.ackPending(); unacked != 1 {
		t.Fatalf("%d unacked requests, want 1: a fenced job must not ack", unacked)
	}
}

func TestStopHandsStreamOver(t *testing.T) {
	// A long AckWait: the request can only be back in the queue at once
	// because the stopping worker gave it back.
	h := start(t, setup{
		mock:     mockupstream.Config{Tokens: 200, TokenInterval: 10 * time.Millisecond},
		topology: streams.Topology{AckWait: time.Minute},
	})
	id := wire.NewStreamID()
	h.submit(id, "interrupted")
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool {
		_, chunks := chunkText(t, h.frames(id))
		return len(chunks) > 0
	})

	h.stop()
	if status := h.waitJob(id); status != "handed_over" {
		t.Fatalf("job status = %q, want handed_over", status)
	}
	if last := h.frames(id); last[len(last)-1].Frame.Kind == wire.KindEnd {
		t.Fatal("a job stopped by shutdown wrote an end frame")
	}
	// The next worker takes the request at once, not after AckWait, and
	// finishes the answer.
	stopped := time.Now()
	h.startWorker(Config{ID: "next-worker"}, nil)
	relaytest.Eventually(t, 10*time.Second, 5*time.Millisecond, func() bool { return claimedBy(h.frames(id), "next-worker") })
	t.Logf("next worker claimed the stream %v after the stop", time.Since(stopped).Round(time.Millisecond))
	text, _ := chunkText(t, h.waitEnd(id))
	if want := mockupstream.AnswerText(userMessages("interrupted"), 200); text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
}

func TestMaxInflightBoundsConcurrency(t *testing.T) {
	const slots, requests = 2, 6
	var active, peak atomic.Int64
	h := start(t, setup{
		mock:   mockupstream.Config{Tokens: 20, TokenInterval: 5 * time.Millisecond},
		worker: Config{MaxInflight: slots},
		wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := active.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				// A call ends for the worker when it reads [DONE]: the
				// handler may still be returning when the freed slot
				// starts the next call.
				end := sync.OnceFunc(func() { active.Add(-1) })
				defer end()
				next.ServeHTTP(endingWriter{w, end}, r)
			})
		},
	})
	ids := make([]string, requests)
	for i := range ids {
		ids[i] = wire.NewStreamID()
		h.submit(ids[i], "request "+ids[i])
	}
	for _, id := range ids {
		frames := h.waitEnd(id)
		text, _ := chunkText(t, frames)
		if want := mockupstream.AnswerText(userMessages("request "+id), 20); text != want {
			t.Errorf("stream %s: text = %q, want %q", id, text, want)
		}
		if end := frames[len(frames)-1].Frame; end.Status != wire.StatusDone {
			t.Errorf("stream %s ended %s", id, end.Status)
		}
	}
	if p := peak.Load(); p != slots {
		t.Fatalf("peak concurrent upstream calls = %d, want %d", p, slots)
	}
}

func TestFirstDeliveryClaimsWithoutReadingUnlessFenced(t *testing.T) {
	h := start(t, setup{mock: mockupstream.Config{Tokens: 5, TokenInterval: -1}})
	fresh, taken := wire.NewStreamID(), wire.NewStreamID()
	if err := h.appendFrames(taken, wire.Frame{Kind: wire.KindClaim, Worker: "earlier"}); err != nil {
		t.Fatal(err)
	}
	h.submit(fresh, "fresh")
	h.submit(taken, "taken")
	for _, id := range []string{fresh, taken} {
		frames := h.waitEnd(id)
		if end := frames[len(frames)-1].Frame; end.Status != wire.StatusDone {
			t.Fatalf("stream %s ended %s", id, end.Status)
		}
	}
	readFirst := func(id string) bool {
		_, ok := h.logs.find(func(l map[string]string) bool {
			return l["msg"] == "first delivery found frames; reading the stream" && l["stream"] == id
		})
		return ok
	}
	if readFirst(fresh) {
		t.Fatalf("the fresh stream's first delivery was fenced")
	}
	if !readFirst(taken) {
		t.Fatalf("the first delivery of a stream with frames did not fall back to reading it")
	}
	if f := h.frames(taken)[1].Frame; f.Kind != wire.KindClaim || f.Worker != "test-worker" {
		t.Fatalf("frame after the earlier claim = %+v, want our claim", f)
	}
}

// endingWriter calls end before it writes the [DONE] event of a chat
// stream.
type endingWriter struct {
	http.ResponseWriter
	end func()
}

func (w endingWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("data: [DONE]")) {
		w.end()
	}
	return w.ResponseWriter.Write(p)
}

func (w endingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
