package edge

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/relaytest"
)

// A draining edge ends its Durable Streams' live reads at once, cleanly,
// long before their own ends: a waiting long-poll answers 204 at the tail,
// as its timeout would, and an SSE response ends with a control event at
// the offset it reached, from which the client reconnects to another edge
// and reads what was appended since. Serve returns nil.
func TestDrainEndsDurableStreamsLiveReads(t *testing.T) {
	e := newEnv(t)
	cfg := Config{DurableStreams: DurableStreamsConfig{LongPollTimeout: time.Minute, SSEDuration: time.Hour}}
	a, b := e.startEdge(cfg), e.startEdge(cfg)
	path := "/ds/drain/1"
	res := do(t, http.MethodPut, a.url+path, "before ", http.Header{"Content-Type": {"text/plain"}})
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %d %s", res.StatusCode, readAll(t, res))
	}
	tail := res.Header.Get("Stream-Next-Offset")

	subs := a.nc.NumSubscriptions()
	type answer struct {
		res *http.Response
		err error
	}
	polled := make(chan answer, 1)
	go func() {
		res, err := http.Get(a.url + path + "?offset=" + tail + "&live=long-poll")
		polled <- answer{res, err}
	}()
	sse, err := http.Get(a.url + path + "?offset=-1&live=sse")
	if err != nil {
		t.Fatal(err)
	}
	defer sse.Body.Close()
	r := bufio.NewReader(sse.Body)
	if ctl := nextControl(t, r); ctl["streamNextOffset"] != tail {
		t.Fatalf("SSE's first control event %v, want the offset %s", ctl, tail)
	}
	// Both reads wait for the stream's frames.
	relaytest.Eventually(t, 5*time.Second, 5*time.Millisecond, func() bool { return a.nc.NumSubscriptions() == subs+2 })

	began := time.Now()
	if err := a.shutdown(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	took := time.Since(began)
	p := <-polled
	if p.err != nil {
		t.Fatalf("the long-poll: %v", p.err)
	}
	if p.res.StatusCode != http.StatusNoContent || p.res.Header.Get("Stream-Next-Offset") != tail || p.res.Header.Get("Stream-Up-To-Date") != "true" {
		t.Fatalf("the long-poll was answered %d %v, want 204 at %s, up to date", p.res.StatusCode, p.res.Header, tail)
	}
	ctl := nextControl(t, r)
	if ctl["streamNextOffset"] != tail || ctl["upToDate"] != true || ctl["streamClosed"] != nil {
		t.Fatalf("SSE's last control event %v, want the offset %s, up to date, not closed", ctl, tail)
	}
	if rest, err := r.ReadString(0); strings.TrimSpace(rest) != "" || err != io.EOF {
		t.Fatalf("after the last control event: %q, %v; want the response's end", rest, err)
	}
	if took > 5*time.Second {
		t.Fatalf("the drain took %v", took)
	}

	// The client reconnects from that offset to the other edge.
	if res := do(t, http.MethodPost, b.url+path, "after", http.Header{"Content-Type": {"text/plain"}}); res.StatusCode != http.StatusNoContent {
		t.Fatalf("POST: %d %s", res.StatusCode, readAll(t, res))
	}
	if res := do(t, http.MethodGet, b.url+path+"?offset="+tail, "", nil); readAll(t, res) != "after" {
		t.Fatal("the other edge does not read on from the last control event's offset")
	}
}

// nextControl reads SSE events until a control event and returns it.
func nextControl(t *testing.T, r *bufio.Reader) map[string]any {
	t.Helper()
	event := ""
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:") && event == "control":
			var ctl map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSpace(line[len("data:"):])), &ctl); err != nil {
				t.Fatalf("control event %q: %v", line, err)
			}
			return ctl
		}
	}
}
