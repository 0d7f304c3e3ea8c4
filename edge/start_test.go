package edge

import (
	"net/http"
	"strings"
	"testing"
)

func TestNewStreamIsServedWithoutReadingTheLog(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(20)})
	edge := e.startEdge(Config{})
	for _, stream := range []bool{true, false} {
		res := do(t, "POST", edge.url+"/v1/chat/completions", chatBody(stream, "hi"), nil)
		body := readAll(t, res)
		if stream {
			checkAnswer(t, body, 20)
		} else if res.StatusCode != http.StatusOK || !strings.Contains(body, `w19 w20 "`) {
			t.Fatalf("completion: %d %s", res.StatusCode, body)
		}
	}
	// Followed before their requests were queued, both streams came live.
	if n := edge.hub.Stats().Reads; n != 0 {
		t.Fatalf("%d reads of the log for new streams", n)
	}
}
