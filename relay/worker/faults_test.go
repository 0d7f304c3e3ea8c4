package worker

import (
	"testing"
	"time"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

func TestStreamSurvivesNATSRestart(t *testing.T) {
	const tokens = 300
	natsSrv := relaytest.RestartableNATS(t)
	// A long AckWait keeps the queue from handing the request elsewhere
	// while the server is away: the one worker must carry the stream
	// across the restart by itself.
	h := start(t, setup{
		srv:      natsSrv.Server(),
		mock:     mockupstream.Config{Tokens: tokens, TokenInterval: 10 * time.Millisecond},
		topology: streams.Topology{AckWait: time.Minute},
	})
	id, content := wire.NewStreamID(), "survive a restart"
	h.submit(id, content)
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool {
		_, chunks := chunkText(t, h.frames(id))
		return len(chunks) > 3
	})

	natsSrv.Stop()
	// The upstream keeps streaming into the worker while its appends fail.
	relaytest.Eventually(t, waitFor, 5*time.Millisecond, func() bool {
		_, ok := h.logs.find(func(l map[string]string) bool {
			return l["msg"] == "chunk log unavailable; retrying" && l["stream"] == id
		})
		return ok
	})
	natsSrv.Start()

	frames := h.waitEnd(id)
	text, chunks := chunkText(t, frames)
	if want := mockupstream.AnswerText(userMessages(content), tokens); text != want {
		t.Fatalf("text = %q\nwant   %q", text, want)
	}
	if end := endOf(frames); end.Status != wire.StatusDone || end.Attempts != 1 {
		t.Fatalf("end = %+v, want done after 1 attempt", end)
	}
	for _, c := range chunks {
		if c.Attempt != 1 {
			t.Fatalf("chunk %d of attempt %d: the stream was not carried by one call", c.Seq, c.Attempt)
		}
	}
	if status := h.waitJob(id); status != "done" {
		t.Fatalf("job status = %q", status)
	}
	if st := h.mock.Stats(); st.ChatRequests != 1 {
		t.Fatalf("%d upstream requests, want 1", st.ChatRequests)
	}
	h.waitAcked()

	// The slots pull again after the restart: a new request is served.
	next := wire.NewStreamID()
	h.submit(next, "after the restart")
	if end := endOf(h.waitEnd(next)); end.Status != wire.StatusDone {
		t.Fatalf("request after the restart ended %s", end.Status)
	}
}

func TestWorkersShareTheQueue(t *testing.T) {
	const perWorker, requests = 2, 8
	h := start(t, setup{
		mock:     mockupstream.Config{Tokens: 20, TokenInterval: 10 * time.Millisecond},
		noWorker: true,
	})
	h.startWorker(Config{ID: "worker-a", MaxInflight: perWorker}, nil)
	h.startWorker(Config{ID: "worker-b", MaxInflight: perWorker}, nil)
	ids := make([]string, requests)
	for i := range ids {
		ids[i] = wire.NewStreamID()
		h.submit(ids[i], "share "+ids[i])
	}
	served := map[string]int{}
	for _, id := range ids {
		frames := h.waitEnd(id)
		if end := endOf(frames); end.Status != wire.StatusDone {
			t.Fatalf("stream %s ended %s", id, end.Status)
		}
		served[frames[0].Frame.Worker]++
	}
	if served["worker-a"] == 0 || served["worker-b"] == 0 || served["worker-a"]+served["worker-b"] != requests {
		t.Fatalf("served %v: want both workers to take requests", served)
	}
}
