package edge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/dialect/responses"
	"github.com/relaydev/relay/relay/wire"
)

// responsesBody is a Responses request for testModel.
func responsesBody(extra string) string {
	return fmt.Sprintf(`{"model":%q,"input":"hi"%s}`, testModel, extra)
}

// respEvent is the part of a Responses event the tests check.
type respEvent struct {
	Type     string          `json:"type"`
	Seq      int             `json:"sequence_number"`
	Delta    string          `json:"delta"`
	Response *responseResult `json:"response"`
}

// responseResult is the part of a Response the tests check.
type responseResult struct {
	ID                string                       `json:"id"`
	Status            string                       `json:"status"`
	IncompleteDetails *responses.IncompleteDetails `json:"incomplete_details"`
	Error             *responses.ResponseError     `json:"error"`
	Output            []struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		Status    string `json:"status"`
		Name      string `json:"name"`
		CallID    string `json:"call_id"`
		Arguments string `json:"arguments"`
		Content   []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage *responses.Usage `json:"usage"`
}

// text is the output text of a Response.
func (r responseResult) text() string {
	var b strings.Builder
	for _, it := range r.Output {
		for _, c := range it.Content {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// respEvents decodes a Responses event stream, checking that every event
// has its type in both its event line and its data.
func respEvents(t *testing.T, body string) []respEvent {
	t.Helper()
	var out []respEvent
	for _, ev := range parseSSE(t, body) {
		if ev.Retry != "" || ev.Comment != "" {
			continue
		}
		var re respEvent
		if err := json.Unmarshal([]byte(ev.Data), &re); err != nil || re.Type != ev.Event {
			t.Fatalf("event %q with data %s (%v)", ev.Event, ev.Data, err)
		}
		out = append(out, re)
	}
	return out
}

// checkNumbered checks that events are numbered first, first+1, ...
func checkNumbered(t *testing.T, events []respEvent, first int) {
	t.Helper()
	for i, ev := range events {
		if ev.Seq != first+i {
			t.Fatalf("event %d (%s) has sequence_number %d, want %d", i, ev.Type, ev.Seq, first+i)
		}
	}
}

// deltas is the text of the output_text.delta events.
func deltas(events []respEvent) string {
	var b strings.Builder
	for _, ev := range events {
		if ev.Type == "response.output_text.delta" {
			b.WriteString(ev.Delta)
		}
	}
	return b.String()
}

func decodeResponse(t *testing.T, res *http.Response) responseResult {
	t.Helper()
	var r responseResult
	if err := jsonDecode(res, &r); err != nil {
		t.Fatalf("status %d: not a Response: %v", res.StatusCode, err)
	}
	return r
}

// TestResponsesWireFormat pins the events of a stream with text, a
// fallback seam and a tool call, and shows that a resume with
// starting_after writes exactly the events after it, as numbered in the
// whole stream.
func TestResponsesWireFormat(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{RetryHint: 1500 * time.Millisecond})
	e.writeStream(fixedID, wire.Meta{Model: testModel, Created: 1700000000}, goldenFrames())
	url := edge.url + "/v1/responses/" + responses.ResponseID(fixedID) + "?stream=true"

	whole := readAll(t, do(t, "GET", url, "", nil))
	golden(t, "responses_done.sse", whole)
	all := parseSSE(t, whole)
	for _, after := range []int{0, 5, 12} {
		// openai-go's GetStreaming asks with "stream" in the GET's body.
		for _, req := range []struct{ url, body string }{
			{fmt.Sprintf("%s&starting_after=%d", url, after), ""},
			{fmt.Sprintf("%s/v1/responses/%s?starting_after=%d", edge.url, responses.ResponseID(fixedID), after), `{"stream":true}`},
		} {
			body := readAll(t, do(t, "GET", req.url, req.body, nil))
			// The retry event, then the events numbered after+1 on.
			if got, want := parseSSE(t, body)[1:], all[after+2:]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("GET %s %s:\n%+v\nwant\n%+v", req.url, req.body, got, want)
			}
		}
	}

	res := do(t, "GET", edge.url+"/v1/responses/"+responses.ResponseID(fixedID), "", nil)
	r := decodeResponse(t, res)
	if res.StatusCode != http.StatusOK || r.Status != "completed" || r.text() != "Hello" || len(r.Output) != 2 ||
		r.Output[1].Type != "function_call" || r.Output[1].CallID != "call_1" || r.Output[1].Arguments != "{}" ||
		r.Usage == nil || r.Usage.InputTokens != 4 || r.Usage.OutputTokens != 2 {
		t.Fatalf("Response %d %+v", res.StatusCode, r)
	}
}

// TestResponsesStreamAndWhole streams an answer and asks for one whole,
// through a worker.
func TestResponsesStreamAndWhole(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(5)})
	edge := e.startEdge(Config{})

	res := do(t, "POST", edge.url+"/v1/responses", responsesBody(`,"stream":true`), nil)
	id := res.Header.Get("X-Relay-Stream-Id")
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	events := respEvents(t, readAll(t, res))
	checkNumbered(t, events, 0)
	last := events[len(events)-1]
	if deltas(events) != words(5) || events[0].Type != "response.created" || last.Type != "response.completed" ||
		last.Response.ID != "resp_"+id || last.Response.text() != words(5) || last.Response.Usage.OutputTokens != 5 {
		t.Fatalf("events %+v", events)
	}
	// The worker got a chat completion request.
	if req := <-w.reqs; string(req.Body) != fmt.Sprintf(`{"messages":[{"role":"user","content":"hi"}],"model":%q}`, testModel) {
		t.Fatalf("queued body %s", req.Body)
	}

	res = do(t, "POST", edge.url+"/v1/responses", responsesBody(""), nil)
	if r := decodeResponse(t, res); res.StatusCode != http.StatusOK || r.Status != "completed" || r.text() != words(5) ||
		r.Output[0].Status != "completed" || r.ID != "resp_"+res.Header.Get("X-Relay-Stream-Id") {
		t.Fatalf("Response %d %+v", res.StatusCode, r)
	}
}

// TestResponsesEndings: every stream ends with an event that says how; a
// cut answer never ends completed, and only a failed one is an HTTP error
// when asked for whole.
func TestResponsesEndings(t *testing.T) {
	for _, tc := range []struct {
		name       string
		script     script
		event      string
		status     string
		reason     string
		wholeHTTP  int
		itemStatus string
	}{
		{"incomplete", failing(wire.StatusIncomplete, &wire.Error{Message: "provider stalled", Type: wire.TypeIncomplete, Code: "upstream_stalled", Status: 504}),
			"response.incomplete", "incomplete", "upstream_stalled", http.StatusOK, "incomplete"},
		{"failed", failing(wire.StatusFailed, &wire.Error{Message: "bad request", Type: "invalid_request_error", Status: 400}),
			"response.failed", "failed", "", http.StatusBadRequest, "incomplete"},
		{"length", func(wire.Request) []wire.Frame {
			return []wire.Frame{{Kind: wire.KindChunk, Content: "w1 "}, {Kind: wire.KindEnd, Status: wire.StatusDone, FinishReason: "length"}}
		}, "response.incomplete", "incomplete", "max_output_tokens", http.StatusOK, "incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.startWorker(&worker{script: tc.script})
			edge := e.startEdge(Config{})
			events := respEvents(t, readAll(t, do(t, "POST", edge.url+"/v1/responses", responsesBody(`,"stream":true`), nil)))
			checkNumbered(t, events, 0)
			last := events[len(events)-1]
			if last.Type != tc.event || last.Response.Status != tc.status || last.Response.Output[0].Status != tc.itemStatus {
				t.Fatalf("last event %+v", last)
			}
			if tc.reason != "" && (last.Response.IncompleteDetails == nil || last.Response.IncompleteDetails.Reason != tc.reason) {
				t.Fatalf("incomplete_details %+v", last.Response.IncompleteDetails)
			}
			if tc.status == "failed" && (events[len(events)-2].Type != "error" || last.Response.Error == nil) {
				t.Fatalf("a failed stream ends %+v", events[len(events)-2:])
			}

			res := do(t, "POST", edge.url+"/v1/responses", responsesBody(""), nil)
			if res.StatusCode != tc.wholeHTTP {
				t.Fatalf("whole: %d %s", res.StatusCode, readAll(t, res))
			}
			if tc.wholeHTTP == http.StatusOK {
				if r := decodeResponse(t, res); r.Status != tc.status {
					t.Fatalf("whole: %+v", r)
				}
			} else if got := decodeError(t, res); got.Type != "invalid_request_error" {
				t.Fatalf("whole: error %+v", got)
			}
		})
	}
}

// TestResponsesRefusalIsAnHTTPError: a provider's refusal before any token
// is the stream's failed end frame; a streamed request gets it as an HTTP
// error with the provider's status, which SDKs raise as such, and the
// stream's id with it.
func TestResponsesRefusalIsAnHTTPError(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: func(wire.Request) []wire.Frame {
		return []wire.Frame{{Kind: wire.KindEnd, Status: wire.StatusFailed,
			Error: &wire.Error{Message: "bad request", Type: "invalid_request_error", Code: "invalid_value", Status: http.StatusBadRequest}}}
	}})
	edge := e.startEdge(Config{})
	res := do(t, "POST", edge.url+"/v1/responses", responsesBody(`,"stream":true`), nil)
	if got := decodeError(t, res); res.StatusCode != http.StatusBadRequest || got.Type != "invalid_request_error" ||
		got.Code != "invalid_value" || !wire.ValidStreamID(res.Header.Get("X-Relay-Stream-Id")) {
		t.Fatalf("%d %+v, stream id %q", res.StatusCode, got, res.Header.Get("X-Relay-Stream-Id"))
	}
}

// TestResponsesBackgroundResumeOnOtherEdge starts a background response on
// one edge, reads it and resumes its events on another edge, where a
// resume with starting_after gets exactly the events the client missed,
// numbered as the first edge numbered them.
func TestResponsesBackgroundResumeOnOtherEdge(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(6), gate: make(chan struct{})})
	edge1, edge2 := e.startEdge(Config{}), e.startEdge(Config{})

	res := do(t, "POST", edge1.url+"/v1/responses", responsesBody(`,"background":true`), nil)
	r := decodeResponse(t, res)
	// in_progress once a worker claimed it.
	if res.StatusCode != http.StatusOK || r.Status != "queued" && r.Status != "in_progress" || len(r.Output) != 0 || !strings.HasPrefix(r.ID, "resp_") {
		t.Fatalf("background POST: %d %+v", res.StatusCode, r)
	}
	w.gate <- struct{}{}
	w.gate <- struct{}{}
	waitFor(t, func() bool {
		got := decodeResponse(t, do(t, "GET", edge2.url+"/v1/responses/"+r.ID, "", nil))
		return got.Status == "in_progress" && got.text() == "w1 w2 "
	})

	// A client reads the first events on edge 1 and loses its connection.
	first := do(t, "GET", edge1.url+"/v1/responses/"+r.ID+"?stream=true", "", nil)
	seen := readEvents(t, bufio.NewReader(first.Body), func(ev sseEvent) bool { return strings.Contains(ev.Data, `"delta":"w2 "`) })
	first.Body.Close()
	var lastSeen respEvent
	if err := json.Unmarshal([]byte(seen[len(seen)-1].Data), &lastSeen); err != nil {
		t.Fatal(err)
	}
	// It resumes on edge 2 while the answer goes on.
	rest := do(t, "GET", fmt.Sprintf("%s/v1/responses/%s?stream=true&starting_after=%d", edge2.url, r.ID, lastSeen.Seq), "", nil)
	close(w.gate)
	resumed := respEvents(t, readAll(t, rest))
	checkNumbered(t, resumed, lastSeen.Seq+1)
	if got := "w1 w2 " + deltas(resumed); got != words(6) || resumed[len(resumed)-1].Type != "response.completed" {
		t.Fatalf("text %q, last %+v", got, resumed[len(resumed)-1])
	}
	// The events are those of the whole stream after the cursor.
	whole := respEvents(t, readAll(t, do(t, "GET", edge1.url+"/v1/responses/"+r.ID+"?stream=true", "", nil)))
	if string(mustJSON(t, whole[lastSeen.Seq+1:])) != string(mustJSON(t, resumed)) {
		t.Fatalf("resumed events differ from the whole stream's")
	}
}

func TestResponsesCancel(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(10), gate: make(chan struct{})})
	edge := e.startEdge(Config{})

	r := decodeResponse(t, do(t, "POST", edge.url+"/v1/responses", responsesBody(`,"background":true`), nil))
	w.gate <- struct{}{}
	waitFor(t, func() bool {
		return decodeResponse(t, do(t, "GET", edge.url+"/v1/responses/"+r.ID, "", nil)).text() == "w1 "
	})
	res := do(t, "POST", edge.url+"/v1/responses/"+r.ID+"/cancel", "", nil)
	if got := decodeResponse(t, res); res.StatusCode != http.StatusOK || got.Status != "cancelled" || got.text() != "w1 " {
		t.Fatalf("cancel: %d %+v", res.StatusCode, got)
	}
	events := respEvents(t, readAll(t, do(t, "GET", edge.url+"/v1/responses/"+r.ID+"?stream=true", "", nil)))
	if last := events[len(events)-1]; last.Type != "response.incomplete" || last.Response.Status != "cancelled" ||
		last.Response.IncompleteDetails.Reason != "cancelled" {
		t.Fatalf("cancelled stream ends %+v", last)
	}
}

// TestResponsesTenantIsolation: another tenant's Response is not found,
// whatever it asks of it.
func TestResponsesTenantIsolation(t *testing.T) {
	e := newEnv(t)
	e.startWorker(&worker{script: answer(2)})
	edge := e.startEdge(tenantConfig())

	res := do(t, "POST", edge.url+"/v1/responses", responsesBody(`,"background":true`), bearerHeader(keyAcme))
	r := decodeResponse(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST: %d", res.StatusCode)
	}
	waitFor(t, func() bool {
		return decodeResponse(t, do(t, "GET", edge.url+"/v1/responses/"+r.ID, "", bearerHeader(keyAcme))).Status == "completed"
	})
	for _, req := range []struct{ method, path string }{
		{"GET", r.ID},
		{"GET", r.ID + "?stream=true&starting_after=1"},
		{"POST", r.ID + "/cancel"},
	} {
		res := do(t, req.method, edge.url+"/v1/responses/"+req.path, "", bearerHeader(keyBeta))
		if got := decodeError(t, res); res.StatusCode != http.StatusNotFound || got.Code != CodeResponseNotFound {
			t.Errorf("%s %s by another tenant: %d %+v", req.method, req.path, res.StatusCode, got)
		}
	}
	// The resume token of the POST reads the Response without a key, and
	// cannot cancel it.
	token := res.Header.Get(HeaderResumeToken)
	if got := decodeResponse(t, do(t, "GET", edge.url+"/v1/responses/"+r.ID+"?token="+token, "", nil)); got.Status != "completed" {
		t.Errorf("GET with the resume token: %+v", got)
	}
	if events := respEvents(t, readAll(t, do(t, "GET", edge.url+"/v1/responses/"+r.ID+"?stream=true&token="+token, "", nil))); len(events) == 0 ||
		events[len(events)-1].Type != "response.completed" {
		t.Errorf("streamed with the resume token: %+v", events)
	}
	if res := do(t, "POST", edge.url+"/v1/responses/"+r.ID+"/cancel?token="+token, "", nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("cancel with the resume token: %d", res.StatusCode)
	}
	// The stream is still acme's, and was not cancelled.
	if got := decodeResponse(t, do(t, "GET", edge.url+"/v1/responses/"+r.ID, "", bearerHeader(keyAcme))); got.Status != "completed" {
		t.Fatalf("after the other tenant's requests: %+v", got)
	}
}

func TestResponsesRequestErrors(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{MaxTokensCap: 100})
	for _, tc := range []struct {
		name, body, param, code string
		status                  int
	}{
		{"unknown model", `{"model":"nope","input":"hi"}`, "model", CodeModelNotFound, http.StatusNotFound},
		{"no input", fmt.Sprintf(`{"model":%q}`, testModel), "input", CodeInvalidValue, http.StatusBadRequest},
		{"unknown previous response", responsesBody(`,"previous_response_id":"resp_x"`), "previous_response_id", CodePreviousResponseNotFound, http.StatusBadRequest},
		{"built-in tool", responsesBody(`,"tools":[{"type":"web_search"}]`), "tools[0].type", CodeUnsupportedParameter, http.StatusBadRequest},
		{"unknown parameter", responsesBody(`,"frobnicate":1`), "frobnicate", CodeUnsupportedParameter, http.StatusBadRequest},
		{"over the token cap", responsesBody(`,"max_output_tokens":101`), "max_output_tokens", CodeLimitExceeded, http.StatusBadRequest},
		{"temperature", responsesBody(`,"temperature":3`), "temperature", CodeInvalidValue, http.StatusBadRequest},
		{"bad role", fmt.Sprintf(`{"model":%q,"input":[{"role":"tool","content":"x"}]}`, testModel), "input[0].role", CodeInvalidValue, http.StatusBadRequest},
	} {
		res := do(t, "POST", edge.url+"/v1/responses", tc.body, nil)
		if got := decodeError(t, res); res.StatusCode != tc.status || got.Param != tc.param || got.Code != tc.code {
			t.Errorf("%s: %d %+v", tc.name, res.StatusCode, got)
		}
	}
	for _, path := range []string{"resp_nope", "snope", "resp_" + fixedID} {
		res := do(t, "GET", edge.url+"/v1/responses/"+path, "", nil)
		if got := decodeError(t, res); res.StatusCode != http.StatusNotFound || got.Code != CodeResponseNotFound {
			t.Errorf("GET %s: %d %+v", path, res.StatusCode, got)
		}
	}
	res := do(t, "GET", edge.url+"/v1/responses/resp_"+fixedID+"?stream=true&starting_after=-1", "", nil)
	if got := decodeError(t, res); res.StatusCode != http.StatusBadRequest || got.Param != "starting_after" {
		t.Errorf("starting_after=-1: %d %+v", res.StatusCode, got)
	}
}

// TestResponsesDrainedClientResumesOnAnotherEdge: an edge that drains ends
// a Responses stream with an error event that repeats the number of the
// last event the client got, so that resuming after it on another edge
// misses nothing and repeats nothing.
func TestResponsesDrainedClientResumesOnAnotherEdge(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(&worker{script: answer(10), gate: make(chan struct{})})
	a, b := e.startEdge(Config{}), e.startEdge(Config{})

	// The response begins with its first frame (follow_first_frame.go).
	released := make(chan struct{})
	go func() {
		defer close(released)
		for range 3 {
			w.gate <- struct{}{}
		}
	}()
	res := do(t, "POST", a.url+"/v1/responses", responsesBody(`,"stream":true`), nil)
	id := responses.ResponseID(res.Header.Get("X-Relay-Stream-Id"))
	<-released
	r := bufio.NewReader(res.Body)
	got := readEvents(t, r, func(ev sseEvent) bool { return strings.Contains(ev.Data, `"delta":"w3 "`) })
	if err := a.shutdown(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	before := respEvents(t, strings.Join(sseBlocks(got), ""))
	last := before[len(before)-1]
	var cut struct {
		respEvent
		Error chat.Error `json:"error"`
	}
	rest := parseSSE(t, readAll(t, &http.Response{Body: readCloser{r}}))
	if len(rest) != 1 || rest[0].Event != "error" || decodeInto(rest[0].Data, &cut) != nil ||
		cut.Seq != last.Seq || cut.Error.Code != CodeDraining {
		t.Fatalf("the drained response ended with %+v after event %d", rest, last.Seq)
	}

	resumed := do(t, "GET", fmt.Sprintf("%s/v1/responses/%s?stream=true&starting_after=%d", b.url, id, cut.Seq), "", nil)
	close(w.gate)
	after := respEvents(t, readAll(t, resumed))
	checkNumbered(t, append(before, after...), 0)
	if text := deltas(before) + deltas(after); text != words(10) {
		t.Fatalf("text across the drain %q", text)
	}
	awaitRunnersGone(t, a, b)
}

// awaitRunnersGone waits until the edges' runners exited. A runner outlives
// the stream it served by runners.Idle, by design (relay/runners), so the
// package's leak check would find one when the test that served it is the
// last one run, as it is with -run Responses.
func awaitRunnersGone(t *testing.T, edges ...*testEdge) {
	t.Helper()
	waitFor(t, func() bool {
		for _, edge := range edges {
			if edge.runners.Waiting() > 0 {
				return false
			}
		}
		return true
	})
}

// sseBlocks renders parsed events back as an event stream.
func sseBlocks(events []sseEvent) []string {
	var out []string
	for _, ev := range events {
		switch {
		case ev.Retry != "":
			out = append(out, "retry: "+ev.Retry+"\n\n")
		case ev.Event != "":
			out = append(out, "event: "+ev.Event+"\ndata: "+ev.Data+"\n\n")
		}
	}
	return out
}
