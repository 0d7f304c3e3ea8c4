package edge

import (
	"net/http"
	"strings"
	"testing"
)

// TestLocationOnEveryGeneration: the first response of every generation,
// in every API, streamed or not, names where to resume it, and a page on
// an allowed origin may read it.
func TestLocationOnEveryGeneration(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(3)})
	edge := e.startEdge(Config{CORSAllowedOrigins: []string{"https://app.example"}})
	json := http.Header{"Content-Type": {"application/json"}, "Origin": {"https://app.example"}}
	for _, tc := range []struct{ name, path, body string }{
		{"chat streamed", "/v1/chat/completions", chatBody(true, "hi")},
		{"chat whole", "/v1/chat/completions", chatBody(false, "hi")},
		{"responses streamed", "/v1/responses", responsesBody(`,"stream":true`)},
		{"responses whole", "/v1/responses", responsesBody("")},
		{"responses background", "/v1/responses", responsesBody(`,"background":true`)},
		{"messages streamed", "/v1/messages", messagesBody(`,"stream":true`)},
		{"messages whole", "/v1/messages", messagesBody("")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, "POST", edge.url+tc.path, tc.body, json)
			readAll(t, res)
			id := res.Header.Get("X-Relay-Stream-Id")
			if res.StatusCode != http.StatusOK || id == "" || res.Header.Get("Location") != "/v1/streams/"+id {
				t.Fatalf("%d Location %q for stream %q", res.StatusCode, res.Header.Get("Location"), id)
			}
			if !exposes(res.Header.Get("Access-Control-Expose-Headers"), "Location") {
				t.Fatalf("Location not exposed: %q", res.Header.Get("Access-Control-Expose-Headers"))
			}
		})
	}
	t.Run("websocket", func(t *testing.T) {
		conn := dialWS(t, edge)
		sendWS(t, conn, `{"type":"start","request":`+chatBody(true, "hi")+`}`)
		var started struct {
			Type     string `json:"type"`
			StreamID string `json:"stream_id"`
			Location string `json:"location"`
		}
		if err := conn.ReadJSON(&started); err != nil {
			t.Fatal(err)
		}
		if started.Type != "started" || started.Location != "/v1/streams/"+started.StreamID {
			t.Fatalf("started %+v", started)
		}
	})
}

// exposes reports whether an Access-Control-Expose-Headers value names h.
func exposes(list, h string) bool {
	for v := range strings.SplitSeq(list, ",") {
		if http.CanonicalHeaderKey(strings.TrimSpace(v)) == h {
			return true
		}
	}
	return false
}
