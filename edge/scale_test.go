package edge

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestManyConcurrentStreams(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(20), pace: time.Millisecond})
	// A tiny client buffer, so that some followers overflow and catch up.
	edge := e.startEdge(Config{ClientBuffer: 2})
	const streams = 200
	// A stream that never ends fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, edge.url+"/v1/chat/completions", strings.NewReader(chatBody(true, fmt.Sprint(i))))
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer res.Body.Close()
			var body strings.Builder
			if _, err := bufio.NewReader(res.Body).WriteTo(&body); err != nil {
				errs <- err
				return
			}
			if !strings.HasSuffix(body.String(), "data: [DONE]\n\n") || strings.Count(body.String(), "\nid: ") != 21 {
				errs <- fmt.Errorf("stream %d:\n%s", i, body.String())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitFor(t, func() bool { return edge.hub.Streams() == 0 && edge.clients.count(clientSSE) == 0 })
	s := edge.hub.Stats()
	t.Logf("dropped %d, catch-ups: gap %d, woken %d, idle %d", s.Dropped, s.Gaps, s.Woken, s.Idle)
}

func TestTwoEdgesServeOneStream(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(12), gate: make(chan struct{})})
	a, b := e.startEdge(Config{}), e.startEdge(Config{})

	res := do(t, "POST", a.url+"/v1/chat/completions", chatBody(true, "hi"), nil)
	id := res.Header.Get("X-Relay-Stream-Id")
	for range 4 {
		w.gate <- struct{}{}
	}
	// The same stream, followed live from the other edge.
	other := do(t, "GET", b.url+"/v1/streams/"+id, "", nil)
	if other.StatusCode != http.StatusOK {
		t.Fatalf("other edge: %d", other.StatusCode)
	}
	close(w.gate)
	bodyA, bodyB := readAll(t, res), readAll(t, other)
	checkAnswer(t, bodyA, 12)
	// Only the POST's first event carries the resume token.
	bodyA = strings.Replace(bodyA, `,"resume_token":"`+res.Header.Get(HeaderResumeToken)+`"`, "", 1)
	if bodyA != bodyB {
		t.Fatalf("edges disagree:\n%s\n---\n%s", bodyA, bodyB)
	}
}
