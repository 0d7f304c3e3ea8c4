package edge

import (
	"bufio"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relaydev/relay/relay/wire"
)

func TestDisconnectPolicySyntax(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want DisconnectPolicy
		err  string
	}{
		{"", DisconnectPolicy{}, ""},
		{"continue", DisconnectPolicy{}, ""},
		{"cancel_after 30s", DisconnectPolicy{CancelAfter: 30 * time.Second}, ""},
		{"  cancel_after\t1m30s ", DisconnectPolicy{CancelAfter: 90 * time.Second}, ""},
		{"cancel_after", DisconnectPolicy{}, `want "continue" or "cancel_after <duration>"`},
		{"cancel_after 0s", DisconnectPolicy{}, "must be positive"},
		{"cancel_after -1s", DisconnectPolicy{}, "must be positive"},
		{"cancel_after soon", DisconnectPolicy{}, "invalid duration"},
		{"cancel_after 1s 2s", DisconnectPolicy{}, "want"},
		{"continue 5s", DisconnectPolicy{}, "want"},
		{"stop", DisconnectPolicy{}, "want"},
	} {
		var got DisconnectPolicy
		err := got.UnmarshalText([]byte(tc.in))
		if tc.err == "" && (err != nil || got != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %+v, %v; want %+v, error containing %q", tc.in, got, err, tc.want, tc.err)
		}
		if err == nil {
			if back, _ := parseDisconnectPolicy(got.String()); back != got {
				t.Errorf("%q: String %q does not parse back", tc.in, got.String())
			}
		}
	}
	err := Config{OnClientDisconnect: DisconnectPolicy{CancelAfter: -time.Second}}.Validate("edge")
	if err == nil || !strings.HasPrefix(err.Error(), "edge.on_client_disconnect: ") {
		t.Errorf("negative cancel_after: %v", err)
	}
}

func TestBadDisconnectHeaderIsRefused(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), http.Header{HeaderOnDisconnect: {"cancel_after"}})
	if got := decodeError(t, res); res.StatusCode != 400 || got.Param != HeaderOnDisconnect || got.Code != CodeInvalidValue ||
		res.Header.Get("X-Relay-Stream-Id") != "" {
		t.Fatalf("POST: %d %+v", res.StatusCode, got)
	}
	_, res, err := websocket.DefaultDialer.Dial(wsURL(edge), http.Header{HeaderOnDisconnect: {"later"}})
	if err == nil || res == nil || res.StatusCode != 400 {
		t.Fatalf("upgrade: %v", err)
	}
	res.Body.Close()
}

func wsURL(edge *testEdge) string { return "ws" + strings.TrimPrefix(edge.url, "http") + "/v1/ws" }

// abandon starts a stream on edge with header, reads its first chunk (the
// worker's gate lets it through) and goes away. It returns the stream id
// and the first chunk's cursor.
func abandon(t *testing.T, edge *testEdge, w *worker, header http.Header) (string, string) {
	t.Helper()
	res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(true, "hi"), header)
	id := res.Header.Get("X-Relay-Stream-Id")
	w.gate <- struct{}{}
	got := readEvents(t, bufio.NewReader(res.Body), func(ev sseEvent) bool { return ev.ID != "" })
	res.Body.Close()
	return id, got[len(got)-1].ID
}

func TestCancelAfterCancelsAnAbandonedStream(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(10), gate: make(chan struct{})})
	edge := e.startEdge(Config{OnClientDisconnect: DisconnectPolicy{CancelAfter: 50 * time.Millisecond}})

	id, _ := abandon(t, edge, w, nil)
	if got := <-w.cancelled; got != id {
		t.Fatalf("worker cancelled %s", got)
	}
	waitFor(t, func() bool { return edge.orphans.stats.checks[orphanCancelled].Load() == 1 })
	if meta, _ := e.meta(id); !meta.Cancelled {
		t.Fatalf("meta %+v", meta)
	}
	if end := endOf(t, readAll(t, do(t, "GET", edge.url+"/v1/streams/"+id, "", nil))); end.Relay.Status != wire.StatusCancelled {
		t.Fatalf("end %+v", end)
	}
}

// TestCancelAfterFromHeader: the header turns the policy on for one
// request, and it applies to a WebSocket's starts too.
func TestCancelAfterFromHeader(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(10), gate: make(chan struct{})})
	edge := e.startEdge(Config{})
	header := http.Header{HeaderOnDisconnect: {"cancel_after 50ms"}}

	t.Run("POST", func(t *testing.T) {
		id, _ := abandon(t, edge, w, header)
		if got := <-w.cancelled; got != id {
			t.Fatalf("worker cancelled %s", got)
		}
	})
	t.Run("WebSocket", func(t *testing.T) {
		conn, res, err := websocket.DefaultDialer.Dial(wsURL(edge), header)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		sendWS(t, conn, `{"type":"start","request":`+chatBody(true, "hi")+`}`)
		id := readWS(t, conn).StreamID
		w.gate <- struct{}{}
		if m := readWS(t, conn); m.Type != "chunk" {
			t.Fatalf("first message %+v", m)
		}
		conn.Close()
		if got := <-w.cancelled; got != id {
			t.Fatalf("worker cancelled %s", got)
		}
	})
}

// TestCancelAfterSparesAStreamResumedElsewhere: the client comes back on
// another edge within the duration, so the stream is followed when the
// timer asks, and it is never cancelled.
func TestCancelAfterSparesAStreamResumedElsewhere(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(10), gate: make(chan struct{})})
	a := e.startEdge(Config{OnClientDisconnect: DisconnectPolicy{CancelAfter: 300 * time.Millisecond}})
	b := e.startEdge(Config{})
	stats := &a.orphans.stats

	id, cursor := abandon(t, a, w, nil)
	resumed := do(t, "GET", b.url+"/v1/streams/"+id, "", http.Header{"Last-Event-Id": {cursor}})
	r := bufio.NewReader(resumed.Body)
	readEvents(t, r, func(ev sseEvent) bool { return ev.Retry != "" })

	waitFor(t, func() bool { return stats.checks[orphanFollowed].Load() >= 1 })
	if meta, _ := e.meta(id); meta.Cancelled || stats.checks[orphanCancelled].Load() != 0 {
		t.Fatalf("a followed stream was cancelled: %+v", meta)
	}
	close(w.gate)
	rest := readAll(t, &http.Response{Body: readCloser{r}})
	if end := endOf(t, rest); end.Relay.Status != wire.StatusDone || len(frameEvents(parseSSE(t, rest))) != 10 {
		t.Fatalf("after resuming at %s:\n%s", cursor, rest)
	}
	// Nobody follows the stream now; the next check finds it ended.
	waitFor(t, func() bool { return stats.checks[orphanEnded].Load() == 1 })
	if meta, _ := e.meta(id); meta.Cancelled || stats.checks[orphanCancelled].Load() != 0 {
		t.Fatalf("an ended stream was cancelled: %+v", meta)
	}
}

func TestContinuePolicyNeverCancels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		header http.Header
	}{
		{"default", Config{}, nil},
		{"header overrides the config", Config{OnClientDisconnect: DisconnectPolicy{CancelAfter: time.Millisecond}}, http.Header{HeaderOnDisconnect: {"continue"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			w := e.startWorker(&worker{script: answer(10), gate: make(chan struct{})})
			edge := e.startEdge(tc.cfg)
			stats := &edge.orphans.stats

			id, _ := abandon(t, edge, w, tc.header)
			waitFor(t, func() bool { return stats.left.Load() == 1 })
			if n := stats.watched.Load(); n != 0 {
				t.Fatalf("%d streams watched", n)
			}
			// The generation runs on, and is there for whoever resumes it.
			close(w.gate)
			if got := checkAnswer(t, readAll(t, do(t, "GET", edge.url+"/v1/streams/"+id, "", nil)), 10); got != words(10) {
				t.Fatalf("text %q", got)
			}
			if meta, _ := e.meta(id); meta.Cancelled {
				t.Fatalf("meta %+v", meta)
			}
		})
	}
}

// TestPresence: an edge answers for a stream exactly while it has a
// follower of it, and NATS says at once when no edge does.
func TestPresence(t *testing.T) {
	e := newEnv(t)
	a := e.startEdge(Config{})
	id := wire.NewStreamID()
	// answers reports whether followed gave a definite answer, want. A
	// question that crosses a subscription going away goes unanswered:
	// unknown, and asked again.
	answers := func(want bool) func() bool {
		return func() bool {
			got, err := followed(t.Context(), e.nc, id)
			if err != nil && !errors.Is(err, errPresenceUnknown) {
				t.Fatal(err)
			}
			return err == nil && got == want
		}
	}
	start := time.Now()
	if !answers(false)() {
		t.Fatal("an unfollowed stream is followed, or unknown")
	}
	if d := time.Since(start); d >= presenceTimeout {
		t.Fatalf("no-responders took %v", d)
	}
	f, err := a.hub.Follow(id, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, answers(true))
	f.Close()
	// Once the server has the unsubscription, the answer is definite.
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if !answers(false)() {
		t.Fatal("a stream whose last follower left is followed, or unknown")
	}
}
